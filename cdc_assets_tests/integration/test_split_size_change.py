"""snapshot.split_size changed after the plan: the frozen plan is kept, and `plan` and `snapshot` both say so in
one line with the way to re-plan. Run as an operator runs the CLI."""
import subprocess

import pytest

from cdc_assets_tests.support import cli_command, postgres_target, source_database, write_config

pytestmark = pytest.mark.spark  # `snapshot` starts Spark in the CLI's process


def cli(path, *args) -> subprocess.CompletedProcess:
    done = subprocess.run(cli_command(path, *args), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def test_a_changed_split_size_is_named_at_snapshot_time(tmp_path, servers, unique_name):
    db, target_db = unique_name, f"{unique_name}_tgt"
    postgres_target(servers, target_db).close()

    def config(split_size: int):
        return write_config(tmp_path, servers, task_id="sizes", source="mysql", source_db=db, tables=[f"{db}.t"],
                            target="postgres", target_db=target_db, snapshot={"split_size": split_size})

    with source_database(servers, "mysql", db, ["CREATE TABLE t (id INT PRIMARY KEY, v INT)",
                                                 "INSERT INTO t SELECT seq, seq FROM seq_1_to_300"]):
        path = config(100)
        assert "snapshot.split_size" not in cli(path, "plan").stdout
        config(50)
        for command in ("plan", "snapshot"):
            out = cli(path, command).stdout
            said = [line for line in out.splitlines() if "snapshot.split_size" in line]
            assert len(said) == 1, out
            assert f"{db}.t: snapshot.split_size is 50 but its plan" in said[0] and "made with 100" in said[0]
            assert "cdc-assets plan --replan" in said[0]
        assert f"{db}.t: 3/3 splits finished" in out  # the plan made with 100 was kept
        assert servers.mariadb.password not in out
