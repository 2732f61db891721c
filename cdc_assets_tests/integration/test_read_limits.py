"""Read limits on real servers: a snapshot under `snapshot.read_limit` reads no faster than the limit, all its
Spark tasks together (COPY into PostgreSQL, and the paced pass-through before JDBC into MariaDB), and a backlog
under `pipeline.read_limit` is applied no faster than the limit; both copy every row exactly. The time bounds are
lower bounds: the limit's correctness, not a speed claim."""
import functools
import time

import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import PhaseHooks, TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets_tests.support import config_for, fetch_rows, run_transactions, snapshot_all, source_database

ROWS = 2000
ROWS_PER_SECOND = 500  # 2000 rows: at least 4 s of read time at the limit, under 2 s without it


def seed(kind: str, ns: str) -> list[str]:
    """`items` of ROWS rows, and `warmup` of 10: snapshotted first, so that the measured read is not the first
    one of the Spark session (a cold JVM and Python workers take seconds, which would hide a missing limit)."""
    if kind == "mysql":
        return [f"CREATE TABLE {t} (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2), seen DATETIME(6))"
                for t in ("items", "warmup")] + [
                f"INSERT INTO {t} SELECT seq, CONCAT('item ', seq), seq / 3, TIMESTAMP('2024-01-01') + INTERVAL "
                f"seq MINUTE FROM seq_1_to_{n}" for t, n in (("items", ROWS), ("warmup", 10))]
    return [f"CREATE SCHEMA {ns}"] + [
        f"CREATE TABLE {ns}.{t} (id INT PRIMARY KEY, name VARCHAR(40), price NUMERIC(10,2), seen TIMESTAMP(6))"
        for t in ("items", "warmup")] + [
        f"INSERT INTO {ns}.{t} SELECT g, 'item ' || g, g / 3.0, TIMESTAMP '2024-01-01' + g * INTERVAL '1 minute' "
        f"FROM generate_series(1, {n}) g" for t, n in (("items", ROWS), ("warmup", 10))]


class ReadClock:
    """Seconds between each group's low watermark and the end of its staging write: the read time."""

    def __init__(self) -> None:
        self.seconds, self._began = 0.0, None
        self.hooks = PhaseHooks(after_low=self._low, after_write=self._written)

    def _low(self, ids):
        self._began = time.monotonic()

    def _written(self, ids):
        self.seconds += time.monotonic() - self._began


@pytest.mark.parametrize("source_kind,target_kind", [("mysql", "postgres"), ("postgres", "mysql")],
                         ids=["mysql_to_pg_copy", "pg_to_mysql_jdbc"])
def test_a_snapshot_reads_no_faster_than_its_rows_limit(tmp_path, servers, spark, mariadb_target, unique_name,
                                                        source_kind, target_kind):
    ns = unique_name
    table = f"{ns}.items"
    with source_database(servers, source_kind, unique_name, seed(source_kind, ns)) as conn:
        if target_kind == "postgres":
            servers.postgres.create_database(f"{ns}_tgt")
            target_conn, target_server = servers.postgres.connect(f"{ns}_tgt"), None
        else:
            target_conn, target_server = mariadb_target.connect(), mariadb_target
        def task(name, tables, **snapshot):
            return config_for(tmp_path, servers, task_id=f"{name}_{ns}", source=source_kind, source_db=ns,
                              tables=tables, target=target_kind, target_db=f"{ns}_tgt", target_server=target_server,
                              snapshot={"split_size": 500, **snapshot})

        warm = TaskRuntime(task("warm", [f"{ns}.warmup"]))
        warm.adopt_spark(spark)
        try:
            snapshot_all(warm)
        finally:
            warm.close()
        config = task("lim", [table], read_limit={"rows_per_second": ROWS_PER_SECOND})
        clock = ReadClock()
        rt = TaskRuntime(config, clock.hooks)
        rt.adopt_spark(spark)
        try:
            [tp] = ensure_plans(rt)
            results = snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
            source_sql = f"`{ns}`.items" if source_kind == "mysql" else f"{ns}.items"
            target_sql = f'"{ns}"."items"' if target_kind == "postgres" else f"`{ns}`.items"
            assert fetch_rows(target_conn, target_sql, "id") == fetch_rows(conn, source_sql, "id")
        finally:
            rt.close()
            if target_kind == "mysql":
                with target_conn.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS `{ns}`")
            target_conn.close()
    assert sum(r.rows for r in results) == ROWS and len(results) == 4
    assert clock.seconds >= ROWS / ROWS_PER_SECOND * 0.8, f"{ROWS} rows read in {clock.seconds:.2f} s"


BACKLOG = 400
EVENTS_PER_SECOND = 200  # 400 events: at least 2 s at the limit, well under 1 s without it


def test_a_backlog_is_applied_no_faster_than_the_log_limit(tmp_path, servers, spark, pg_target, unique_name):
    seed_sql = ["CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2), seen DATETIME(6))",
                "INSERT INTO items VALUES (1, 'first', 1.00, '2024-01-01 00:00:00')"]
    with source_database(servers, "mysql", unique_name, seed_sql) as conn:
        config = config_for(tmp_path, servers, task_id=f"lim_{unique_name}", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.items"], target="postgres", target_db=pg_target[0],
                            pipeline={"checkpoint_after_events": 50,
                                      "read_limit": {"rows_per_second": EVENTS_PER_SECOND}})
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        try:
            snapshot_all(rt)
            # The backlog: 300 inserts in 30 transactions, 50 updates, 50 deletes.
            run_transactions(conn, [";".join(f"INSERT INTO items VALUES ({i}, 'row {i}', {i} / 7, NOW(6))"
                                             for i in range(start, start + 10)) for start in range(2, 302, 10)])
            run_transactions(conn, ["UPDATE items SET name = 'changed' WHERE id BETWEEN 2 AND 51",
                                    "DELETE FROM items WHERE id BETWEEN 252 AND 301"])
            started = time.monotonic()
            report = sync(rt, until_caught_up=True)
            elapsed = time.monotonic() - started
            assert report.events == BACKLOG and report.ended == "caught up"
            assert fetch_rows(pg_target[1], f'"{unique_name}"."items"', "id") == \
                fetch_rows(conn, f"`{unique_name}`.items", "id")
        finally:
            rt.close()
    assert elapsed >= BACKLOG / EVENTS_PER_SECOND * 0.8, f"{BACKLOG} events applied in {elapsed:.2f} s"


TASK_ROWS = 300  # per Spark task; two tasks at once share the limit


def read_numbered(task: int):
    """Runs in a Spark task: one split's rows, read by a source's own client (a `TaskExport`)."""
    for i in range(TASK_ROWS):
        yield task, task * TASK_ROWS + i, f"row {i}"


def test_a_task_write_is_paced_across_its_tasks(servers, spark, pg_target):
    """The sink's own client in each task (MongoDB targets): 600 rows at 200 rows/s for both tasks together."""
    from cdc_assets.config import ReadLimit
    from cdc_assets.core.boundary import RowExport, RowFormat, TaskExport, TaskWrite
    from cdc_assets.core.urls import DbUrl
    from cdc_assets.dbapi.connect import postgres_args
    from cdc_assets.spark.staging import stage
    from cdc_assets_tests.integration.test_task_export import write_rows

    name, conn = pg_target
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE written (split int, id bigint, name text)")
    export = RowExport(RowFormat.COLUMNS, TaskExport((0, 1), read_numbered, "split int, id bigint, name string"), ())
    write = TaskWrite(functools.partial(write_rows, postgres_args(DbUrl.parse(servers.postgres.url(name))), "written"))
    stage(spark, export, write, fetch_size=100)  # unlimited first: the measured run is not the session's first
    with conn.cursor() as cur:
        cur.execute("TRUNCATE written")
    began = time.monotonic()
    assert sum(stage(spark, export, write, fetch_size=100, limit=ReadLimit(rows_per_second=200))) == 2 * TASK_ROWS
    seconds = time.monotonic() - began
    assert fetch_rows(conn, "written", "id") == [(t, t * TASK_ROWS + i, f"row {i}") for t in (0, 1)
                                                 for i in range(TASK_ROWS)]
    assert seconds >= 2 * TASK_ROWS / 200 * 0.8, f"{2 * TASK_ROWS} rows written in {seconds:.2f} s"
