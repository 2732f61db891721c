"""A table removed from source.tables and added back is snapshotted afresh and joins the log phase from its new
snapshot: the target ends equal to the source, rows deleted while it was out included. Run as an operator runs
the CLI."""
import subprocess

import pytest

from cdc_assets_tests.support import cli_command, execute, fetch_rows, postgres_target, source_database, write_config

pytestmark = pytest.mark.spark  # `snapshot` starts Spark in the CLI's process
SEED = [f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL)" for t in ("a", "b")] + [
    f"INSERT INTO {t} SELECT seq, seq FROM seq_1_to_300" for t in ("a", "b")]


def cli(path, *args) -> subprocess.CompletedProcess:
    done = subprocess.run(cli_command(path, *args), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def test_a_table_removed_and_added_back_is_snapshotted_again(tmp_path, servers, unique_name):
    db, target_db = unique_name, f"{unique_name}_tgt"
    tgt = postgres_target(servers, target_db)

    def config(*tables: str):
        return write_config(tmp_path, servers, task_id="readd", source="mysql", source_db=db,
                            tables=[f"{db}.{t}" for t in tables], target="postgres", target_db=target_db,
                            snapshot={"split_size": 100})

    def same(table: str) -> bool:
        return fetch_rows(tgt, f'"{db}".{table}', "id") == fetch_rows(src, table, "id")

    with source_database(servers, "mysql", db, SEED) as src:
        path = config("a", "b")
        cli(path, "snapshot")
        cli(path, "sync", "--until-caught-up")

        config("b")
        execute(src, "UPDATE a SET v = -v WHERE id <= 50", "UPDATE b SET v = -v WHERE id <= 50")
        removed = cli(path, "sync", "--until-caught-up")
        assert "adding it back snapshots it again" in removed.stderr
        # While a is out: deleted rows (one of them at each end of the key range), moved values, new rows.
        execute(src, "DELETE FROM a WHERE id IN (1, 150, 300)", "UPDATE a SET v = v + 1000 WHERE id > 250",
                "INSERT INTO a VALUES (1000, 1)", "UPDATE b SET v = 7 WHERE id = 7")
        assert not same("a")

        config("a", "b")
        done = cli(path, "snapshot")
        assert f"{db}.a: 3/3 splits finished" in done.stdout and f"{db}.b: 3/3 splits finished" in done.stdout
        assert same("a")  # stale rows replaced by the fresh snapshot's key ranges

        execute(src, "UPDATE a SET v = 42 WHERE id IN (2, 299, 1000)", "DELETE FROM a WHERE id = 100",
                "INSERT INTO a VALUES (2000, 2)", "UPDATE b SET v = 8 WHERE id = 8")
        synced = cli(path, "sync", "--until-caught-up")
        assert f"{db}.a joins" in synced.stdout + synced.stderr
        assert same("a") and same("b")
        assert servers.mariadb.password not in "".join(d.stdout + d.stderr for d in (removed, done, synced))
    tgt.close()
