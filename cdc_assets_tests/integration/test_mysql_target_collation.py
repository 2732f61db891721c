"""A MySQL/MariaDB target whose databases default to an accent- and case-insensitive collation, as MySQL 8's
utf8mb4_0900_ai_ci does (MariaDB's nearest: utf8mb4_uca1400_ai_ci): keys that differ only in case, accents or
trailing spaces stay apart through the snapshot (staging tables, the delete-join) and the log, and so do the
position records of two tables whose names differ only in case."""
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.resumer.records import PositionRecord
from cdc_assets.resumer.sql import SqlPositionStore
from cdc_assets.resumer.store import create_table_sql, upsert_params, upsert_sql
from cdc_assets_tests import key_case
from cdc_assets_tests.key_case import KEYS, rows
from cdc_assets_tests.support import config_for, snapshot_all, source_database

INSENSITIVE = "utf8mb4_uca1400_ai_ci"  # MariaDB 10.10+; accent- and case-insensitive like MySQL 8's 0900_ai_ci


def insensitive_databases(server, *names: str) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE {INSENSITIVE}")
    finally:
        conn.close()


def drop_databases(server, *names: str) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        conn.close()


def _table_ids(ns: str, names) -> list[TableId]:
    return [TableId(ns, name) for name in names]


def all_split_ids(rt: TaskRuntime, tables: list[TableId]) -> set[str]:
    return {s.id for t in tables for s in rt.plans.load(t).splits}


def finished_after_restart(config) -> set[str]:
    rt = TaskRuntime(config)
    try:
        return set(rt.resumer.finished())
    finally:
        rt.close()


def test_postgres_keys_differing_in_case_accent_or_trailing_space_stay_apart(tmp_path, servers, spark, unique_name):
    ns, meta = unique_name, f"{unique_name}_meta"
    seed = key_case.seed(ns)
    tables = key_case.tables(ns)
    insensitive_databases(servers.mariadb, ns, meta)
    try:
        with source_database(servers, "postgres", unique_name, seed) as src:
            config = config_for(tmp_path, servers, task_id="mt_collation", source="postgres", source_db=unique_name,
                                tables=[f"{ns}.{t}" for t in tables], target="mysql", target_db="",
                                snapshot={"split_size": 2},
                                resumer={"resume_type": "from_target", "table_full_name": f"{meta}.pos"})
            rt = TaskRuntime(config)
            rt.adopt_spark(spark)
            try:
                snapshot_all(rt)
                splits = all_split_ids(rt, _table_ids(ns, tables))
                with src.cursor() as cur:
                    key_case.change(cur, ns)
                want = {name: rows(src, sql) for name, sql in tables.items()}
                sync(rt, until_caught_up=True)
            finally:
                rt.close()
            assert finished_after_restart(config) == splits
        target = servers.mariadb.connect()
        try:
            got = {name: rows(target, f"`{ns}`.`{name}`") for name in tables}
        finally:
            target.close()
        assert got == want
    finally:
        drop_databases(servers.mariadb, ns, meta)


def test_mysql_keys_differing_in_case_accent_or_trailing_space_stay_apart(tmp_path, servers, mariadb_target, spark,
                                                                         unique_name):
    db, meta = unique_name, f"{unique_name}_meta"
    keys = ", ".join(f"('{k}', {i})" for i, k in enumerate(KEYS))
    seed = ["CREATE TABLE k (id VARCHAR(10) COLLATE utf8mb4_nopad_bin PRIMARY KEY, v INT)",
            f"INSERT INTO k VALUES {keys}",
            "CREATE TABLE Items (id INT PRIMARY KEY, v INT)", "INSERT INTO Items VALUES (1, 1), (2, 2)",
            "CREATE TABLE items (id INT PRIMARY KEY, v INT)", "INSERT INTO items VALUES (1, 10), (3, 30)"]
    names = ["k", "Items", "items"]
    insensitive_databases(mariadb_target, db, meta)
    try:
        with source_database(servers, "mysql", unique_name, seed) as src:
            config = config_for(tmp_path, servers, task_id="mt_collation_my", source="mysql", source_db=db,
                                tables=[f"{db}.{t}" for t in names], target="mysql", target_db="",
                                target_server=mariadb_target, snapshot={"split_size": 2},
                                resumer={"resume_type": "from_target", "table_full_name": f"{meta}.pos"})
            rt = TaskRuntime(config)
            rt.adopt_spark(spark)
            try:
                snapshot_all(rt)
                splits = all_split_ids(rt, _table_ids(db, names))
                with src.cursor() as cur:
                    cur.execute("DELETE FROM k WHERE id IN ('ABC', 'e')")
                    cur.execute("UPDATE k SET v = 100 WHERE id = 'é'")
                    cur.execute("UPDATE k SET v = 200 WHERE id = 'x '")
                    cur.execute("INSERT INTO k VALUES ('X', 300), ('É', 400), ('abc  ', 500)")
                    cur.execute("UPDATE Items SET v = 5 WHERE id = 1")
                    cur.execute("INSERT INTO items VALUES (5, 50)")
                want = {name: rows(src, f"`{name}`") for name in names}
                sync(rt, until_caught_up=True)
            finally:
                rt.close()
            assert finished_after_restart(config) == splits
        target = mariadb_target.connect()
        try:
            got = {name: rows(target, f"`{db}`.`{name}`") for name in names}
        finally:
            target.close()
        assert got == want
    finally:
        drop_databases(mariadb_target, db, meta)


def test_position_table_made_with_the_default_collation_is_converted_and_keeps_its_records(servers, unique_name):
    meta = f"{unique_name}_meta"
    insensitive_databases(servers.mariadb, meta)
    try:
        conn = servers.mariadb.connect(meta)
        try:
            old = PositionRecord("t", "SnapshotFinished", f"{meta}.Items:0000", {"rows": 1})
            with conn.cursor() as cur:  # the table and a record as earlier versions wrote them: ids in the default
                cur.execute(create_table_sql("pos", "mysql"))
                cur.executemany(upsert_sql("pos", "mysql", "%s"), upsert_params([old]))
            url = DbUrl.parse(servers.mariadb.url())
            store = SqlPositionStore(url, f"{meta}.pos", "from_target")
            try:
                store.put([PositionRecord("t", "SnapshotFinished", f"{meta}.items:0000", {"rows": 2})])
                got = {(r.position_key, r.position_data["rows"]) for r in store.load("t")}
            finally:
                store.close()
            with conn.cursor() as cur:
                cur.execute("SELECT DISTINCT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                            "AND TABLE_NAME = 'pos' AND COLUMN_NAME IN ('task_id', 'resumer_type', 'position_key')",
                            (meta,))
                collations = {r[0] for r in cur.fetchall()}
        finally:
            conn.close()
    finally:
        drop_databases(servers.mariadb, meta)
    assert got == {(f"{meta}.Items:0000", 1), (f"{meta}.items:0000", 2)}
    assert collations == {"utf8mb4_nopad_bin"}
