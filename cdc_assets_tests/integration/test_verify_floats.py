"""Verification of floating-point columns, on real servers, for each source and target engine: values that a
single-precision column rounds (1.1, 16777217), its extremes (3.4028234e38, -1.17549435e-38), FLOAT UNSIGNED,
FLOAT(p) and FLOAT(m,d) on MySQL, NaN, ±Infinity and -0 on PostgreSQL pass, whether they came by the snapshot or
through the log; one float changed by a single unit in the last place in the target still fails its split."""
import struct
import threading
import time

import pytest

from cdc_assets.config import load_config
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.verify import FAILED, PASSED, verify_table
from cdc_assets_tests.support import snapshot_all, source_database, write_config

FINITE = ["1.1", "3.4028234e38", "16777217", "-1.17549435e-38", "0.1", "-2.5"]
SPLIT = 3  # rows per split: the snapshot's rows make two or more, the log's land in the last
MYSQL_TABLE = ("CREATE TABLE floats (id INT PRIMARY KEY, f FLOAT, u FLOAT UNSIGNED, p FLOAT(30), d DOUBLE, "
               "s FLOAT(7,3))")
POSTGRES_TABLE = "CREATE TABLE {ns}.floats (id INT PRIMARY KEY, f REAL, d DOUBLE PRECISION)"
POSTGRES_ONLY = ["'NaN'", "'Infinity'", "'-Infinity'", "'-0'"]  # a MySQL target stores none of these but -0 (as 0)


def rows(kind: str, target: str, first_id: int) -> str:
    values = FINITE + (["'-0'"] if kind == "postgres" and target == "mysql" else
                       POSTGRES_ONLY if kind == "postgres" else [])
    if kind == "mysql":
        return ", ".join(f"({first_id + i}, {v}, ABS({v}), {v}, {v}, {i}.125)" for i, v in enumerate(values))
    return ", ".join(f"({first_id + i}, {v}, {v})" for i, v in enumerate(values))


def next_single(value: float) -> float:
    """The next single-precision value above `value`: one unit in the last place of a FLOAT column."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return struct.unpack("<f", struct.pack("<I", bits + 1))[0]


@pytest.fixture
def mysql_target_db(mariadb_target, unique_name):
    yield
    conn = mariadb_target.connect()
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{unique_name}`")
    conn.close()


@pytest.mark.spark
@pytest.mark.parametrize("kind, target", [("mysql", "postgres"), ("postgres", "postgres"), ("mysql", "mysql"),
                                          ("postgres", "mysql")])
def test_floats_pass_and_a_changed_float_fails(kind, target, tmp_path, servers, mariadb_target, mysql_target_db,
                                               unique_name, pg_target, spark):
    table_sql = "floats" if kind == "mysql" else f"{unique_name}.floats"
    seed = [MYSQL_TABLE] if kind == "mysql" else [f"CREATE SCHEMA {unique_name}",
                                                  POSTGRES_TABLE.format(ns=unique_name)]
    seed.append(f"INSERT INTO {table_sql} VALUES {rows(kind, target, 1)}")
    with source_database(servers, kind, unique_name, seed) as source:
        path = write_config(tmp_path, servers, task_id=f"vf_{unique_name}", source=kind, source_db=unique_name,
                            tables=[f"{unique_name}.floats"], target=target,
                            target_db=pg_target[0] if target == "postgres" else "",
                            target_server=mariadb_target if target == "mysql" else None,
                            snapshot={"split_size": SPLIT}, pipeline={"checkpoint_interval_secs": 0.3})
        config = load_config(path)
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        snapshot_all(rt)
        table = config.source.table_ids[0]
        stop = threading.Event()
        syncer = TaskRuntime(config)
        thread = threading.Thread(target=sync, args=(syncer,), kwargs={"stop": stop}, daemon=True)
        thread.start()
        try:
            with source.cursor() as cur:  # the same values again, through the log
                cur.execute(f"INSERT INTO {table_sql} VALUES {rows(kind, target, 101)}")
            deadline = time.monotonic() + 60  # the sync's first checkpoint: verification does not wait for it
            while rt.resumer.checkpoint() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            checks = verify_table(rt, table, wait_secs=60)
            assert len(checks) >= 2 and all(c.status == PASSED for c in checks), [c.line() for c in checks]
            assert sum(c.source_rows for c in checks) == 2 * len(rows(kind, target, 1).split("), ("))

            # 1.1 in the target's FLOAT/real column one unit in the last place higher: a real difference.
            changed = next_single(1.1)
            target_conn = pg_target[1] if target == "postgres" else mariadb_target.connect()
            quoted = f'"{unique_name}".floats' if target == "postgres" else f"`{unique_name}`.floats"
            with target_conn.cursor() as cur:
                cur.execute(f"UPDATE {quoted} SET f = %s WHERE id = 101", (repr(changed),))
                assert cur.rowcount == 1
            if target == "mysql":
                target_conn.close()
            checks = verify_table(rt, table, wait_secs=60)
            failed = [c for c in checks if c.status == FAILED]
            assert [c.detail.split(";")[0] for c in failed] == [f"source {failed[0].source_rows} rows, target "
                                                                f"{failed[0].target_rows}: different 1 (101)"], \
                [c.line() for c in checks]
            assert all(c.status == PASSED for c in checks if c not in failed)
        finally:
            stop.set()
            thread.join(60)
            syncer.close()
            rt.close()
