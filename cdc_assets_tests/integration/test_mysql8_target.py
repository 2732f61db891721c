"""MySQL 8 as a target, against CDC_TEST_MYSQL8_URL (skipped without it; written by reading the MySQL 8.0/8.4
manuals, not run here): databases defaulting to utf8mb4_0900_ai_ci, sql_require_primary_key=ON and
sql_generate_invisible_primary_key=ON (8.0.30+). Keys that differ only in case, accents or trailing spaces, and
tables whose names differ only in case, arrive as the source has them; nothing the task creates gets a
generated invisible primary key; a user's table that has one is refused until the source's key is unique."""
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.dbapi.mysql_flavour import detect
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import TableError
from cdc_assets_tests import key_case
from cdc_assets_tests.key_case import rows
from cdc_assets_tests.support import MYSQL8_URL, config_for, mysql8, snapshot_all, source_database

pytestmark = mysql8

STRICT = {"sql_require_primary_key": "ON", "sql_generate_invisible_primary_key": "ON"}


@contextmanager
def mysql8_target(*databases: str):
    """An admin connection to the MySQL 8 server with `databases` created 0900_ai_ci and the strict settings on
    globally (the sink's sessions open inside), all put back afterwards."""
    conn = connect(DbUrl.parse(MYSQL8_URL, "CDC_TEST_MYSQL8_URL"), database="")
    flavour = detect(conn)
    assert flavour.mysql8, f"CDC_TEST_MYSQL8_URL points at {flavour}, not MySQL 8"
    settings = {k: v for k, v in STRICT.items() if k != "sql_generate_invisible_primary_key" or
                flavour.at_least(8, 0, 30)}
    with conn.cursor() as cur:
        before = {}
        for name, value in settings.items():
            cur.execute(f"SELECT @@GLOBAL.{name}")
            before[name] = cur.fetchone()[0]
            cur.execute(f"SET GLOBAL {name} = {value}")
        for name in databases:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci")
    try:
        yield conn
    finally:
        with conn.cursor() as cur:
            for name, value in before.items():
                cur.execute(f"SET GLOBAL {name} = %s", (value,))
            for name in databases:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


def task(tmp_path, servers, spark, db: str, tables: list[str], **extra) -> TaskRuntime:
    rt = TaskRuntime(config_for(tmp_path, servers, task_id="m8_target", source="postgres", source_db=db,
                                tables=tables, target="mysql", target_db="",
                                target_server=SimpleNamespace(url=lambda: MYSQL8_URL), snapshot={"split_size": 2},
                                **extra))
    rt.adopt_spark(spark)
    return rt


def test_postgres_into_mysql8_with_0900_ai_ci_and_required_primary_keys(tmp_path, servers, spark, unique_name):
    ns, meta = unique_name, f"{unique_name}_meta"
    seed = key_case.seed(ns)
    tables = key_case.tables(ns)
    with mysql8_target(ns, meta) as target, source_database(servers, "postgres", unique_name, seed) as src:
        rt = task(tmp_path, servers, spark, unique_name, [f"{ns}.{t}" for t in tables],
                  resumer={"resume_type": "from_target", "table_full_name": f"{meta}.pos"})
        try:
            snapshot_all(rt)
            splits = {s.id for t in tables for s in rt.plans.load(TableId(ns, t)).splits}
            with src.cursor() as cur:
                key_case.change(cur, ns)
            want = {name: rows(src, sql) for name, sql in tables.items()}
            sync(rt, until_caught_up=True)
            assert set(rt.resumer.finished()) == splits
        finally:
            rt.close()
        assert {name: rows(target, f"`{ns}`.`{name}`") for name in tables} == want
        with target.cursor() as cur:
            cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.COLUMNS "
                        "WHERE TABLE_SCHEMA IN (%s, %s) AND COLUMN_NAME = 'my_row_id'", (ns, meta))
            assert cur.fetchall() == ()  # every table the task created has a primary key of its own


def test_mysql8_table_with_a_generated_invisible_primary_key_is_refused_until_the_key_is_unique(
        tmp_path, servers, spark, unique_name):
    ns = unique_name
    seed = [f"CREATE SCHEMA {ns}", f"CREATE TABLE {ns}.g (id INT PRIMARY KEY, v INT)",
            f"INSERT INTO {ns}.g VALUES (1, 1), (2, 2), (3, 3)"]
    with mysql8_target(ns) as target, source_database(servers, "postgres", unique_name, seed) as src:
        if not detect(target).at_least(8, 0, 30):
            pytest.skip("sql_generate_invisible_primary_key needs MySQL 8.0.30 or later")
        with target.cursor() as cur:
            cur.execute(f"CREATE TABLE `{ns}`.g (id INT NOT NULL, v INT)")  # gets my_row_id, invisible
        rt = task(tmp_path, servers, spark, unique_name, [f"{ns}.g"])
        try:
            with pytest.raises(TableError, match=rf"target table {ns}.g .* primary key \(my_row_id\)"):
                ensure_plans(rt)
        finally:
            rt.close()
        with target.cursor() as cur:
            cur.execute(f"ALTER TABLE `{ns}`.g ADD UNIQUE KEY (id)")
        rt = task(tmp_path, servers, spark, unique_name, [f"{ns}.g"])
        try:
            snapshot_all(rt)
            with src.cursor() as cur:
                cur.execute(f"UPDATE {ns}.g SET v = 20 WHERE id = 2")
                cur.execute(f"INSERT INTO {ns}.g VALUES (4, 4)")
            sync(rt, until_caught_up=True)
        finally:
            rt.close()
        assert rows(target, f"`{ns}`.g") == rows(src, f"{ns}.g")
        with target.cursor() as cur:
            cur.execute(f"SELECT COUNT(DISTINCT my_row_id) FROM `{ns}`.g")
            assert cur.fetchone()[0] == 4  # the invisible key numbered every row the task inserted
