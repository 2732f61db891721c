"""Declaratively partitioned PostgreSQL tables: snapshotted through the parent, their changes (which happen in the
leaf partitions) captured under the configured table, partitions added later included; a leaf named in the
config is a table of its own."""
import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import ConfigError, SourceSetupError
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


def test_a_partitioned_table_whose_partitions_lack_its_full_replica_identity_stops_before_any_null(
        tmp_path, servers, source, pg_target):
    """REPLICA IDENTITY FULL set on a partitioned table alone (as the key-move stop's way out once said) leaves its
    partitions on the default. pgoutput then flags their old rows whole ('O', after the root's identity) while they
    hold only the key and NULL for every other column: a key move took those NULLs for the row's unchanged TOASTed
    text, and the target lost it without a word."""
    ns, conn = source
    execute(conn, "ALTER TABLE app.orders ALTER COLUMN note SET STORAGE EXTERNAL",
            "ALTER TABLE app.orders_1 ALTER COLUMN note SET STORAGE EXTERNAL",
            "UPDATE app.orders SET note = repeat('toasted ', 1000) WHERE id = 10")
    rt = runtime(tmp_path, servers, source, pg_target, ["app.orders"])
    try:
        snapshot_all(rt)
        sync(rt, until_caught_up=True)
        execute(conn, "ALTER TABLE app.orders REPLICA IDENTITY FULL",
                "UPDATE app.orders SET id = 11 WHERE id = 10")  # within orders_1: an UPDATE, the text unchanged
        with pytest.raises(SourceSetupError) as stop:
            sync(rt, until_caught_up=True)
        assert "app.orders" in str(stop.value) and "ALTER TABLE app.orders_1 REPLICA IDENTITY FULL" in stop.value.hint
        assert "plan --replan" in stop.value.hint
        execute(conn, "ALTER TABLE app.orders_1 REPLICA IDENTITY FULL",
                "ALTER TABLE app.orders_2 REPLICA IDENTITY FULL")
        ensure_plans(rt, replan=True)  # the way out named
        snapshot_all(rt)
        execute(conn, "UPDATE app.orders SET id = 12 WHERE id = 11")  # whole old rows from here on
        sync(rt, until_caught_up=True)
    finally:
        rt.close()
    assert fetch_rows(pg_target[1], '"app"."orders"', "id") == fetch_rows(conn, "app.orders", "id")
