"""MySQL/MariaDB as a target: text keys the source keeps apart stay apart (case, accents, trailing spaces), an
existing target table whose key collation would merge them is refused, and nullable TIMESTAMP columns stay
nullable whatever explicit_defaults_for_timestamp says."""
import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import TableError
from cdc_assets_tests.support import config_for, snapshot_all, source_database

KEYS = ["abc", "ABC", "e", "é", "x", "x ", "Straße", "STRASSE"]


def task(tmp_path, servers, spark, kind: str, db: str, ns: str, table: str) -> TaskRuntime:
    config = config_for(tmp_path, servers, task_id=f"mt_{db}"[:40], source=kind, source_db=db,
                        tables=[f"{ns}.{table}"], target="mysql", target_db="", snapshot={"split_size": 3})
    rt = TaskRuntime(config)
    rt.adopt_spark(spark)
    return rt


def mysql_rows(servers, ns: str, table: str, columns: str) -> list[tuple]:
    conn = servers.mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT {columns} FROM `{ns}`.`{table}`")
            return sorted(cur.fetchall())
    finally:
        conn.close()


def test_text_keys_the_source_keeps_apart_stay_apart_in_snapshot_and_log(tmp_path, servers, spark, unique_name):
    ns = unique_name
    values = ", ".join(f"('{k}', {i})" for i, k in enumerate(KEYS))
    seed = [f"CREATE SCHEMA {ns}", f"CREATE TABLE {ns}.k (id VARCHAR(10) PRIMARY KEY, v INT)",
            f"INSERT INTO {ns}.k VALUES {values}"]
    with source_database(servers, "postgres", unique_name, seed) as src:
        rt = task(tmp_path, servers, spark, "postgres", unique_name, ns, "k")
        try:
            snapshot_all(rt)
            assert mysql_rows(servers, ns, "k", "id, v") == sorted((k, i) for i, k in enumerate(KEYS))
            with src.cursor() as cur:
                cur.execute(f"DELETE FROM {ns}.k WHERE id = 'ABC'")
                cur.execute(f"UPDATE {ns}.k SET v = 100 WHERE id = 'é'")
                cur.execute(f"UPDATE {ns}.k SET v = 200 WHERE id = 'x '")
                cur.execute(f"INSERT INTO {ns}.k VALUES ('X', 300)")
                cur.execute(f"SELECT id, v FROM {ns}.k")
                want = sorted(cur.fetchall())
            sync(rt, until_caught_up=True)
        finally:
            rt.close()
        assert mysql_rows(servers, ns, "k", "id, v") == want


def test_existing_target_table_with_a_merging_key_collation_is_refused(tmp_path, servers, spark, unique_name):
    ns = unique_name
    seed = [f"CREATE SCHEMA {ns}", f"CREATE TABLE {ns}.k (id VARCHAR(10) PRIMARY KEY, v INT)"]
    with source_database(servers, "postgres", unique_name, seed):
        servers.mariadb.create_database(ns)
        conn = servers.mariadb.connect(ns)
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE k (id VARCHAR(10) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)")
        conn.close()
        rt = task(tmp_path, servers, spark, "postgres", unique_name, ns, "k")
        try:
            with pytest.raises(TableError, match=rf"key column 'id' of target table {ns}.k .* utf8mb4_general_ci"):
                ensure_plans(rt)
        finally:
            rt.close()


def test_nullable_timestamps_stay_nullable_with_explicit_defaults_off(tmp_path, servers, mariadb_target, spark,
                                                                     unique_name):
    seed = ["CREATE TABLE t (id INT PRIMARY KEY, v INT, t1 TIMESTAMP(6) NULL, t2 TIMESTAMP NULL DEFAULT NULL)",
            "INSERT INTO t VALUES (1, 1, NULL, NULL), (2, 2, '2024-01-02 03:04:05.678901', NULL)"]
    admin = mariadb_target.connect()
    with admin.cursor() as cur:
        cur.execute("SET GLOBAL explicit_defaults_for_timestamp = OFF")  # new sessions, the sink's included
    try:
        with source_database(servers, "mysql", unique_name, seed) as src:
            rt = TaskRuntime(config_for(tmp_path, servers, task_id="mt_ts", source="mysql", source_db=unique_name,
                                        tables=[f"{unique_name}.t"], target="mysql", target_db="",
                                        target_server=mariadb_target))
            rt.adopt_spark(spark)
            try:
                snapshot_all(rt)
                with src.cursor() as cur:
                    cur.execute("UPDATE t SET v = v + 10")
                sync(rt, until_caught_up=True)
            finally:
                rt.close()
        with admin.cursor() as cur:
            cur.execute(f"SELECT id, v, t1, t2 FROM `{unique_name}`.t ORDER BY id")
            got = cur.fetchall()
            cur.execute(f"DROP DATABASE `{unique_name}`")
    finally:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL explicit_defaults_for_timestamp = DEFAULT")
        admin.close()
    assert [(r[0], r[1], r[3]) for r in got] == [(1, 11, None), (2, 12, None)]
    assert got[0][2] is None and str(got[1][2]) == "2024-01-02 03:04:05.678901"
