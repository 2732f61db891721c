"""Declaratively partitioned PostgreSQL tables: snapshotted through the parent, their changes (which happen in the
leaf partitions) captured under the configured table, partitions added later included; a leaf named in the
config is a table of its own."""
import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import ConfigError
from cdc_assets_tests.support import config_for, execute, fetch_rows, snapshot_all, source_database

SEED = [
    "CREATE SCHEMA app",
    "CREATE TABLE app.orders (id INT PRIMARY KEY, v INT, note TEXT) PARTITION BY RANGE (id)",
    "CREATE TABLE app.orders_1 PARTITION OF app.orders FOR VALUES FROM (1) TO (1000)",
    "CREATE TABLE app.orders_2 PARTITION OF app.orders FOR VALUES FROM (1000) TO (2000)",
    "INSERT INTO app.orders SELECT g, 0, 'seed' FROM generate_series(1, 1800, 3) g",
    "CREATE TABLE app.events (id INT PRIMARY KEY, kind TEXT) PARTITION BY RANGE (id)",
    "CREATE TABLE app.events_a PARTITION OF app.events FOR VALUES FROM (1) TO (100)",
    "CREATE TABLE app.events_b PARTITION OF app.events FOR VALUES FROM (100) TO (200)",
    "INSERT INTO app.events SELECT g, 'seed' FROM generate_series(1, 199, 2) g",
]
CHANGES = [
    "INSERT INTO app.orders VALUES (2, 1, 'new'), (1001, 1, 'new')",
    "UPDATE app.orders SET v = v + 1 WHERE id % 9 = 1",  # both partitions
    "DELETE FROM app.orders WHERE id BETWEEN 900 AND 1100",
    "UPDATE app.orders SET id = 1500 WHERE id = 4",  # the row moves from orders_1 to orders_2
    "UPDATE app.orders_2 SET note = 'through the leaf' WHERE id = 1003",  # a leaf written to directly
    "CREATE TABLE app.orders_3 PARTITION OF app.orders FOR VALUES FROM (2000) TO (3000)",
    "INSERT INTO app.orders VALUES (2500, 7, 'in a partition created after the snapshot')",
    "CREATE TABLE app.orders_4 (LIKE app.orders INCLUDING ALL)",
    "ALTER TABLE app.orders ATTACH PARTITION app.orders_4 FOR VALUES FROM (3000) TO (4000)",
    "INSERT INTO app.orders_4 VALUES (3500, 8, 'in an attached partition')",
    "UPDATE app.orders SET v = 9 WHERE id IN (2500, 3500)",
    "INSERT INTO app.events VALUES (50, 'new a'), (150, 'new b')",
    "UPDATE app.events SET kind = 'changed' WHERE id % 10 = 1",
    "DELETE FROM app.events WHERE id IN (7, 107)",
]


@pytest.fixture
def source(servers, unique_name):
    with source_database(servers, "postgres", unique_name, SEED) as conn:
        conn.autocommit = True
        yield unique_name, conn


def runtime(tmp_path, servers, source, pg_target, tables: list[str]) -> TaskRuntime:
    config = config_for(tmp_path, servers, task_id=f"part_{source[0]}", source="postgres", source_db=source[0],
                        tables=tables, target="postgres", target_db=pg_target[0], snapshot={"split_size": 150},
                        pipeline={"checkpoint_after_events": 50})
    return TaskRuntime(config)


def test_partitioned_table_and_a_named_leaf_lose_no_change(tmp_path, servers, spark, source, pg_target):
    rt = runtime(tmp_path, servers, source, pg_target, ["app.orders", "app.events_a"])
    rt.adopt_spark(spark)
    try:
        snapshot_all(rt)
        execute(source[1], *CHANGES)

        report = sync(rt, until_caught_up=True)

        assert fetch_rows(pg_target[1], '"app"."orders"', "id") == fetch_rows(source[1], "app.orders", "id")
        assert fetch_rows(pg_target[1], '"app"."events_a"', "id") == fetch_rows(source[1], "app.events_a", "id")
        assert report.per_table["app.orders"] > 0 and report.per_table["app.events_a"] > 0
    finally:
        rt.close()


def test_a_partitioned_table_and_its_own_partition_are_refused(tmp_path, servers, source, pg_target):
    rt = runtime(tmp_path, servers, source, pg_target, ["app.events", "app.events_b"])
    try:
        with pytest.raises(ConfigError, match="app.events_b is a partition of app.events"):
            ensure_plans(rt)
    finally:
        rt.close()
