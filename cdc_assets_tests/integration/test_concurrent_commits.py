"""A snapshot's groups commit side by side into PostgreSQL (each on a connection of its own), one at a time into
MariaDB (whose range deletes lock the gaps a neighbouring group inserts into); either way the target ends with
exactly the source's rows."""
import threading
import time

import pytest

from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets_tests.support import config_for, fetch_rows, source_database

pytestmark = pytest.mark.spark
ROWS = 3000  # twelve splits of 250: three groups of four on local[2] (two splits per slot)
WAIT_SECS = 20


def seed(schema: str) -> list[str]:
    """The source table `<schema>.items`: a MySQL target holds it in a database of that name."""
    return [f"CREATE SCHEMA {schema}", f"CREATE TABLE {schema}.items (id INT PRIMARY KEY, name TEXT, price NUMERIC(10,2))",
            f"INSERT INTO {schema}.items SELECT g, 'item ' || g, g / 3.0 FROM generate_series(1, {ROWS}) g"]


class MergeWatch:
    """Wraps a sink's merge_staged: counts merges running at once, and the commit connections they used."""

    def __init__(self, sink, hold_first: bool) -> None:
        self.merge, self.hold_first = sink.merge_staged, hold_first
        self.lock, self.running, self.most, self.calls = threading.Lock(), 0, 0, 0
        self.second, self.connections = threading.Event(), set()
        sink.merge_staged = self

    def __call__(self, cursor, *args, **kwargs):
        with self.lock:
            self.calls += 1
            first, self.running = self.calls == 1, self.running + 1
            self.most = max(self.most, self.running)
            self.connections.add(id(cursor.connection))
            if self.calls == 2:
                self.second.set()
        try:
            if first and self.hold_first:
                assert self.second.wait(WAIT_SECS), "no second group committed while the first one did"
            elif first:
                time.sleep(1.0)  # room for a second commit to start, if the sink allowed one
            return self.merge(cursor, *args, **kwargs)
        finally:
            with self.lock:
                self.running -= 1


def snapshot(tmp_path, servers, spark, source_db: str, target: str, target_db: str, hold_first: bool):
    config = config_for(tmp_path, servers, task_id="commits", source="postgres", source_db=source_db,
                        tables=[f"{source_db}.items"], target=target, target_db=target_db,
                        snapshot={"split_size": 250})
    rt = TaskRuntime(config)
    rt.adopt_spark(spark)
    try:
        [tp] = ensure_plans(rt)
        watch = MergeWatch(rt.sink, hold_first)
        results = snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
        assert sum(r.rows for r in results) == ROWS and len(rt.resumer.finished()) == len(tp.plan.splits) == 12
        return watch
    finally:
        rt.close()


def test_postgresql_groups_commit_side_by_side_on_their_own_connections(tmp_path, servers, spark, unique_name,
                                                                         pg_target):
    table = f"{unique_name}.items"
    with source_database(servers, "postgres", unique_name, seed(unique_name)) as src:
        watch = snapshot(tmp_path, servers, spark, unique_name, "postgres", pg_target[0], hold_first=True)
        assert watch.most == 2 and len(watch.connections) == 2 and watch.calls == 3
        assert fetch_rows(pg_target[1], table, "id") == fetch_rows(src, table, "id")


def test_mariadb_groups_commit_one_at_a_time(tmp_path, servers, spark, unique_name):
    table = f"{unique_name}.items"
    with source_database(servers, "postgres", unique_name, seed(unique_name)) as src:
        watch = snapshot(tmp_path, servers, spark, unique_name, "mysql", "", hold_first=False)
        assert watch.most == 1 and watch.calls == 3
        tgt = servers.mariadb.connect()
        try:
            got = fetch_rows(tgt, table, "id")
            with tgt.cursor() as cur:
                cur.execute(f"DROP DATABASE {unique_name}")
        finally:
            tgt.close()
        assert got == fetch_rows(src, table, "id")
