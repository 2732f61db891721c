"""MySQL zero dates written after the snapshot by a non-strict session (`sql_mode=''`): the log refuses them as the
snapshot does, naming table, column, key and position, into either target kind; a zero date that only an update's
before image or a delete's image holds outside the key stops nothing. The snapshot refuses them into either kind."""
from datetime import datetime

import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import SplitFailed
from cdc_assets.resumer.resumer import Checkpoint
from cdc_assets.sources.mysql.zero_dates import ZeroDateError
from cdc_assets_tests.support import config_for, fetch_rows, snapshot_all, source_database

TABLE = "CREATE TABLE t (id INT PRIMARY KEY, da DATE, dt DATETIME, dt6 DATETIME(6), ts TIMESTAMP NULL, " \
        "ts6 TIMESTAMP(6) NULL, n INT)"
KEYED = "CREATE TABLE k (d DATE NOT NULL, id INT NOT NULL, n INT, PRIMARY KEY (d, id))"
GOOD = "(1, '2020-01-15', '2020-01-15 10:00:00', '2020-01-15 10:00:00.5', '2020-01-15 10:00:00', " \
       "'2020-01-15 10:00:00.25', 0)"


@pytest.fixture(params=["postgres", "mysql"])
def task(request, servers, unique_name, tmp_path):
    """(runtime from the log's end, non-strict source connection, target connection, target table of t, of k)"""
    if request.param == "mysql":
        target_server = request.getfixturevalue("mariadb_target")  # MySQL -> MySQL: a second server
        tables = f"`{unique_name}`.t", f"`{unique_name}`.k"
    else:
        target_server = None
        servers.postgres.create_database(f"{unique_name}_tgt")
        tables = f'"{unique_name}".t', f'"{unique_name}".k'
    with source_database(servers, "mysql", unique_name, [TABLE, KEYED]) as src:
        config = config_for(tmp_path, servers, task_id=unique_name, source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t", f"{unique_name}.k"], target=request.param,
                            target_db="" if target_server else f"{unique_name}_tgt", target_server=target_server,
                            pipeline={"startup_mode": "latest"})
        rt = TaskRuntime(config)
        tgt = target_server.connect() if target_server else servers.postgres.connect(f"{unique_name}_tgt")
        try:
            for table in config.source.table_ids:
                rt.sink.ensure_table(rt.source.describe(table))
            sync(rt, until_caught_up=True)  # the checkpoint: everything after it is read
            with src.cursor() as cur:
                cur.execute("SET SESSION sql_mode = ''")
            yield rt, src, tgt, *tables
        finally:
            rt.close()
            if target_server:
                with tgt.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS `{unique_name}`")
            tgt.close()


def skip_to_the_log_end(rt) -> None:
    """What came before is the snapshot's (`cdc-assets reset --to latest`)."""
    now = rt.resumer.checkpoint()
    rt.resumer.record_committed(rt.resumer.checkpoint_records(
        Checkpoint(rt.source.current_position(), now.schema_version, now.events)))


def run(conn, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


@pytest.mark.parametrize("column, value", [
    ("da", "0000-00-00"), ("da", "2020-00-15"), ("da", "2021-02-00"), ("dt", "0000-00-00 00:00:00"),
    ("dt6", "0000-00-00 00:00:00.000000"), ("ts", "0000-00-00 00:00:00"), ("ts6", "0000-00-00 00:00:00.000000")])
def test_an_insert_with_a_zero_date_stops_naming_table_column_key_and_position(task, unique_name, column, value):
    rt, src, tgt, t, _ = task
    checkpoint = rt.resumer.checkpoint().position
    run(src, f"INSERT INTO t (id, {column}) VALUES (7, '{value}')")

    with pytest.raises(ZeroDateError, match=rf"column {column} of {unique_name}\.t, key \(7,\), at mysql-bin\.\d+:\d+"
                                            r".*NULL or a real date.*plan --replan"):
        sync(rt, until_caught_up=True)

    assert rt.resumer.checkpoint().position == checkpoint
    assert fetch_rows(tgt, t, "id") == []


def test_an_update_to_a_zero_date_stops(task, unique_name):
    rt, src, tgt, t, _ = task
    run(src, f"INSERT INTO t VALUES {GOOD}")
    sync(rt, until_caught_up=True)
    run(src, "UPDATE t SET dt = '2021-02-00 00:00:00' WHERE id = 1")

    with pytest.raises(ZeroDateError, match=rf"column dt of {unique_name}\.t, key \(1,\)"):
        sync(rt, until_caught_up=True)

    assert fetch_rows(tgt, t, "id")[0][2] == datetime(2020, 1, 15, 10, 0)  # the earlier value, not NULL


def test_a_zero_date_only_a_before_image_holds_outside_the_key_stops_nothing(task, unique_name):
    """The rows got their zero dates before the task's start; the updates fixing them, and a delete, are logged
    with them in their before images."""
    rt, src, tgt, t, _ = task
    run(src, "SET SESSION sql_mode = ''", "INSERT INTO t VALUES (1, '0000-00-00', '2020-00-01 00:00:00', NULL, "
        "'0000-00-00 00:00:00', NULL, 0), (2, '2021-02-00', NULL, NULL, NULL, NULL, 0)")
    skip_to_the_log_end(rt)
    with tgt.cursor() as cur:  # as a snapshot would have left them, had it been told to write NULL
        cur.execute(f"INSERT INTO {t} (id, n) VALUES (1, 0), (2, 0)")
    run(src, "SET SESSION sql_mode = 'STRICT_TRANS_TABLES,NO_ZERO_DATE,NO_ZERO_IN_DATE'",
        "UPDATE t SET da = '2020-01-15', dt = NULL, ts = NULL, n = 1 WHERE id = 1", "DELETE FROM t WHERE id = 2")

    sync(rt, until_caught_up=True)

    assert fetch_rows(tgt, t, "id") == fetch_rows(src, "t", "id")


def test_a_zero_date_in_the_key_of_a_before_image_stops(task, unique_name):
    rt, src, tgt, _, k = task
    run(src, "INSERT INTO k VALUES ('0000-00-00', 1, 0)")
    skip_to_the_log_end(rt)
    run(src, "UPDATE k SET d = '2020-01-15' WHERE id = 1")  # the key moves off the zero date

    with pytest.raises(ZeroDateError, match=rf"key column d of {unique_name}\.k, key \(ZERO_DATE, 1\), at"):
        sync(rt, until_caught_up=True)


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_the_snapshot_refuses_the_same_values_into_either_target(request, servers, unique_name, tmp_path, spark,
                                                                 kind):
    """One rule on both paths: the MySQL target's sessions refuse zero dates (NO_ZERO_DATE, NO_ZERO_IN_DATE) as
    PostgreSQL's date types do; before, MySQL -> MySQL copied them while the log made them NULL."""
    target_server = request.getfixturevalue("mariadb_target") if kind == "mysql" else None
    if target_server is None:
        servers.postgres.create_database(f"{unique_name}_tgt")
    seed = ["CREATE TABLE t (id INT PRIMARY KEY, da DATE, dt DATETIME)", "SET SESSION sql_mode = ''",
            "INSERT INTO t VALUES (1, '2020-00-15', '0000-00-00 00:00:00')"]
    with source_database(servers, "mysql", unique_name, seed):
        config = config_for(tmp_path, servers, task_id=unique_name, source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target=kind,
                            target_db="" if target_server else f"{unique_name}_tgt", target_server=target_server)
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        try:
            with pytest.raises(SplitFailed, match=rf"{unique_name}\.t.*2020-00-15.*column.*da"):
                snapshot_all(rt)
        finally:
            rt.close()
            if target_server:
                conn = target_server.connect()
                with conn.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS `{unique_name}`")
                conn.close()
