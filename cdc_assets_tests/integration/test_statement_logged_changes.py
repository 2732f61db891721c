"""Row changes logged as SQL statements (binlog_format STATEMENT or MIXED, set after the plan globally or by one
session) cannot be applied: the sync stops before them, naming the table, the position, the setting and the
way out, and stops again on every rerun until the table is re-snapshotted. Run as an operator runs the CLI."""
import subprocess

import pytest

from cdc_assets_tests.integration.test_capture_checks_live import own_mariadb  # noqa: F401 (a fixture)
from cdc_assets_tests.support import cli_command, execute, fetch_rows, postgres_target, source_database, write_config

SEED = ["CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO t SELECT seq, seq FROM seq_1_to_200",
        "CREATE TABLE u (id INT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO u SELECT seq, seq FROM seq_1_to_20"]


def cli(path, *args) -> subprocess.CompletedProcess:
    return subprocess.run(cli_command(path, *args), capture_output=True, text=True, timeout=600)


def ok(path, *args) -> subprocess.CompletedProcess:
    done = cli(path, *args)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def assert_stopped(done: subprocess.CompletedProcess, password: str, *wanted: str) -> str:
    """Exit 2 with one short error line saying what to do, and no password anywhere."""
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert len(done.stderr.splitlines()) <= 10 and len(errors[0]) < 1200, done.stderr
    assert password not in done.stdout + done.stderr
    for text in wanted:
        assert text in errors[0], errors[0]
    return errors[0]


@pytest.mark.spark  # the way out re-snapshots in the CLI's process
def test_a_session_logging_statements_stops_the_sync_before_them(tmp_path, servers, unique_name):
    db, target_db = unique_name, f"{unique_name}_tgt"
    tgt = postgres_target(servers, target_db)
    password = servers.mariadb.password
    with source_database(servers, "mysql", db, SEED) as src:
        def config(*tables: str):
            return write_config(tmp_path, servers, task_id="stmt", source="mysql", source_db=db,
                                tables=[f"{db}.{t}" for t in tables], target="postgres", target_db=target_db,
                                snapshot={"split_size": 100})

        execute(src, "CREATE TABLE w (id INT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO w VALUES (1, 1), (2, 2)")
        path = config("t", "w")
        ok(path, "snapshot")
        ok(path, "sync", "--until-caught-up")

        # Statements on an uncaptured table, and DDL, go by.
        execute(src, "SET SESSION binlog_format = STATEMENT", "UPDATE u SET v = v + 1 WHERE id < 5",
                "ALTER TABLE u ADD INDEX by_v (v)", "SET SESSION binlog_format = ROW", "UPDATE t SET v = -v WHERE id = 1")
        assert "applied 1 changes" in ok(path, "sync", "--until-caught-up").stdout
        assert fetch_rows(tgt, f'"{db}".t', "id") == fetch_rows(src, "t", "id")

        # One on the captured table, qualified and behind a comment, in a transaction with row changes.
        execute(src, "UPDATE t SET v = 0 WHERE id = 2", "SET SESSION binlog_format = MIXED", "BEGIN",
                f"/* app */ UPDATE `{db}`.t SET v = v * 10 WHERE id BETWEEN 150 AND 160", "COMMIT",
                "SET SESSION binlog_format = ROW", "DELETE FROM t WHERE id = 3")
        first = assert_stopped(cli(path, "sync", "--until-caught-up"), password, f"{db}.t: an UPDATE at mysql-bin.",
                               "logged as an SQL statement", "set binlog_format=ROW", f"re-snapshot {db}.t")
        # The checkpoint did not pass it: a rerun stops there again instead of going on without it.
        assert assert_stopped(cli(path, "sync", "--until-caught-up"), password) == first

        # The way out the error names: re-snapshot the table (out of source.tables for one sync, then back).
        execute(src, "UPDATE w SET v = 5 WHERE id = 1")
        config("w")
        ok(path, "sync", "--until-caught-up")
        config("t", "w")
        ok(path, "snapshot")
        execute(src, "UPDATE t SET v = 9 WHERE id = 4", "UPDATE w SET v = 6 WHERE id = 2")
        ok(path, "sync", "--until-caught-up")
        for table in ("t", "w"):
            assert fetch_rows(tgt, f'"{db}".{table}', "id") == fetch_rows(src, table, "id")
    tgt.close()


def test_binlog_format_switched_globally_stops_the_sync(own_mariadb, tmp_path, servers, unique_name):  # noqa: F811
    db, target_db = unique_name, f"{unique_name}_tgt"
    postgres_target(servers, target_db).close()
    src = own_mariadb.connect()
    src.autocommit(True)
    execute(src, f"CREATE DATABASE `{db}`", f"USE `{db}`", *SEED)
    try:
        path = write_config(tmp_path, servers, task_id="stmt_global", source="mysql", source_db=db,
                            tables=[f"{db}.t"], target="postgres", target_db=target_db,
                            source_extra={"url": own_mariadb.url()}, pipeline={"startup_mode": "latest"})
        ok(path, "plan")
        ok(path, "sync", "--until-caught-up")  # the checkpoint: the log end
        execute(src, "SET GLOBAL binlog_format = STATEMENT")
        try:
            writer = own_mariadb.connect(db)  # a new session takes the global setting
            execute(writer, "UPDATE t SET v = v + 1 WHERE id <= 10")
            writer.close()
            assert_stopped(cli(path, "sync", "--until-caught-up"), own_mariadb.password, "the sync cannot start",
                           "binlog_format is STATEMENT", "set binlog_format=ROW")
        finally:
            execute(src, "SET GLOBAL binlog_format = ROW")
        # Fixed from now on, but the update is in the log as a statement: still a stop, naming the table.
        assert_stopped(cli(path, "sync", "--until-caught-up"), own_mariadb.password,
                       f"{db}.t: an UPDATE at mysql-bin.", f"re-snapshot {db}.t")
    finally:
        execute(src, f"DROP DATABASE `{db}`")
        src.close()


def test_load_data_logged_as_a_statement_stops_the_sync(tmp_path, servers, unique_name):
    db, target_db = unique_name, f"{unique_name}_tgt"
    tgt = postgres_target(servers, target_db)
    rows = tmp_path / "rows.csv"
    rows.write_text("".join(f"{i},{i}\n" for i in range(500, 510)))
    with source_database(servers, "mysql", db, SEED) as src:
        path = write_config(tmp_path, servers, task_id="stmt_load", source="mysql", source_db=db, tables=[f"{db}.t"],
                            target="postgres", target_db=target_db, pipeline={"startup_mode": "latest"})
        ok(path, "plan")
        ok(path, "sync", "--until-caught-up")
        execute(src, "SET SESSION binlog_format = STATEMENT",
                f"LOAD DATA LOCAL INFILE '{rows}' INTO TABLE u FIELDS TERMINATED BY ','")
        assert "applied 0 changes" in ok(path, "sync", "--until-caught-up").stdout  # an uncaptured table
        execute(src, f"LOAD DATA LOCAL INFILE '{rows}' INTO TABLE t FIELDS TERMINATED BY ','")
        assert_stopped(cli(path, "sync", "--until-caught-up"), servers.mariadb.password,
                       f"{db}.t: a LOAD DATA at mysql-bin.", "set binlog_format=ROW")
        assert fetch_rows(tgt, f'"{db}".t', "id") == []  # nothing was applied past it
    tgt.close()
