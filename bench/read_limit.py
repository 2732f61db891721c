"""Read limits: the rate a snapshot and a log phase reach under `snapshot.read_limit` / `pipeline.read_limit`,
beside the limit. The goal is a ratio (achieved / limit) a little under 1: never over, within 10%.

    python bench/read_limit.py [--rows 200000] [--rows-limit 20000] [--bytes-limit 2000000]
                               [--changes 50000] [--events-limit 5000] [--dir /tmp/cdc-bench-limit]

Snapshot, MySQL->PostgreSQL and PostgreSQL->PostgreSQL, a table of --rows rows in splits of half of it (one
group of splits: one Spark wave of two tasks on two cores), in process with a started Spark session: once under
a rows limit, once under a bytes limit. The rate is over the read time (low watermark to the end of the staging
write, summed over groups). Bytes are what the limit counts for a PostgreSQL target: the COPY lines' UTF-8
length, newlines included, measured by an unlimited read of the same export.

Log phase, MySQL->PostgreSQL and PostgreSQL->PostgreSQL: a backlog of --changes row changes (half inserts, half
updates, 1,000 per transaction) applied by `sync(until_caught_up)` under an events limit; the rate is over the
whole sync (session start to caught up). Prints figures, never asserts; a target whose row count or SUM(a)
differs from the source's is reported as MISMATCH.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import yaml

from cdc_assets.config import SparkConfig, load_config
from cdc_assets.core.boundary import CopyOutExport
from cdc_assets.core.tables import TableId
from cdc_assets.dev.servers import start_servers
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import describe, ensure_plans
from cdc_assets.engine.runtime import PhaseHooks, TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets.sources.base import SqlSource
from cdc_assets.sources.postgres.slot import drop_slot, publication_name, slot_name
from cdc_assets.spark.session import build_session
from cdc_assets.spark.staging import read_export

SHAPE = "id BIGINT PRIMARY KEY, a INT, b VARCHAR(64), c DECIMAL(12,2), d {ts}, e DOUBLE PRECISION"
TEXT = "forty characters of text for the row "
TX_ROWS = 1000
SOURCE_DB = {"mysql": "benchl", "postgres": "benchlsrc"}


def run(conn, sql: str, params: tuple = ()) -> list:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall()) if cur.description else []


def fill(kind: str, conn, table: str, lo: int, hi: int) -> None:
    if kind == "mysql":
        run(conn, f"INSERT INTO {table} SELECT seq, MOD(seq, 1000), CONCAT('{TEXT}', LPAD(seq, 7, '0')), seq / 100, "
                  f"TIMESTAMP('2024-01-01') + INTERVAL seq SECOND, seq / 7 FROM seq_{lo}_to_{hi}")
    else:
        run(conn, f"INSERT INTO {table} SELECT g, mod(g, 1000), '{TEXT}' || lpad(g::text, 7, '0'), g / 100.0, "
                  f"TIMESTAMP '2024-01-01' + g * INTERVAL '1 second', g / 7.0 FROM generate_series({lo}, {hi}) g")


class Bench:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.mariadb, self.postgres = start_servers(base / "servers")
        self.spark, _ = build_session(SparkConfig(master="local[*]"), app_name="bench_read_limit")

    def server(self, kind: str):
        return self.mariadb if kind == "mysql" else self.postgres

    def source(self, kind: str):
        server = self.server(kind)
        server.create_database(SOURCE_DB[kind])
        return server.connect(SOURCE_DB[kind])

    def fresh_table(self, kind: str, table: str, rows: int, tasks: list[str]) -> None:
        conn = self.source(kind)
        if kind == "postgres":  # an earlier run's slots would hold WAL and start from their old positions
            for task in tasks:
                drop_slot(conn, slot_name(task))
                run(conn, f"DROP PUBLICATION IF EXISTS {publication_name(task)}")
        run(conn, "CREATE SCHEMA IF NOT EXISTS bench" if kind == "postgres" else "CREATE DATABASE IF NOT EXISTS bench")
        run(conn, f"DROP TABLE IF EXISTS {table}")
        run(conn, f"CREATE TABLE {table} ({SHAPE.format(ts='DATETIME(6)' if kind == 'mysql' else 'TIMESTAMP(6)')})")
        for lo in range(1, rows + 1, 50_000):
            fill(kind, conn, table, lo, min(rows, lo + 49_999))
        conn.close()

    def task(self, name: str, kind: str, table: str, **sections) -> TaskRuntime:
        self.postgres.create_database("warehouse_limit")
        conn = self.postgres.connect("warehouse_limit")
        run(conn, f"DROP SCHEMA IF EXISTS {table.split('.')[0]} CASCADE")
        conn.close()
        shutil.rmtree(self.base / f"state_{name}", ignore_errors=True)
        path = self.base / f"{name}.yaml"
        path.write_text(yaml.safe_dump({
            "task_id": name,
            "source": {"db_type": kind, "url": self.server(kind).url(SOURCE_DB[kind]), "tables": [table]},
            "target": {"db_type": "postgres", "url": self.postgres.url("warehouse_limit")},
            "runtime": {"data_dir": str(self.base / f"state_{name}")},
            "spark": {"master": "local[*]"},
            **sections,
        }))
        rt = TaskRuntime(load_config(path), PhaseHooks())
        rt.adopt_spark(self.spark)
        return rt

    def totals_match(self, kind: str, table: str) -> bool:
        src, tgt = self.source(kind), self.postgres.connect("warehouse_limit")
        sql = f"SELECT COUNT(*), COALESCE(SUM(a), 0) FROM {table}"
        want, got = run(src, sql)[0], run(tgt, sql)[0]
        src.close(), tgt.close()
        if tuple(map(int, want)) != tuple(map(int, got)):
            print(f"!!!!! MISMATCH {table}: source (rows, SUM(a)) = {want}, target = {got} !!!!!")
            return False
        return True


def copy_bytes(rt: TaskRuntime, table: TableId) -> int:
    """What the COPY tasks count for the whole table: each line's UTF-8 length plus its newline."""
    [tp] = [p for p in ensure_plans(rt) if p.plan.table == table]
    schema = describe(rt, table)
    export = rt.source.export(tp.plan, schema, list(tp.plan.splits), rt.sink.target_format())
    if isinstance(export.how, CopyOutExport) and export.how.client == "postgres":  # COPY TO's output is counted
        return sum(copied_bytes(export.how.connect_args, s) for s in export.how.statements)
    if isinstance(export.how, CopyOutExport):  # a MySQL source's piped lines are the JDBC export's, byte for byte
        export = SqlSource.export(rt.source, tp.plan, schema, list(tp.plan.splits), rt.sink.target_format())
    frame = read_export(rt.spark, export, rt.config.snapshot.fetch_size)
    line = frame.columns[0]
    return int(frame.selectExpr(f"sum(octet_length(`{line}`) + 1)").collect()[0][0])


def copied_bytes(connect_args: dict, statement: str) -> int:
    import psycopg2

    class Counter:
        n = 0

        def write(self, data) -> None:
            self.n += len(data)

    out, conn = Counter(), psycopg2.connect(**connect_args)
    try:
        with conn.cursor() as cur:
            cur.copy_expert(statement, out)
    finally:
        conn.close()
    return out.n


def snapshot_run(bench: Bench, kind: str, rows: int, name: str, limit: dict) -> tuple[int, float, int]:
    """(rows, read seconds, COPY bytes) of one limited snapshot of the whole table."""
    table = "bench.limited"
    rt = bench.task(name, kind, table, snapshot={"split_size": rows // 2, "read_limit": limit})
    began = {}
    read = [0.0]
    rt.hooks.after_low = lambda ids: began.update(t=time.monotonic())
    rt.hooks.after_write = lambda ids: read.__setitem__(0, read[0] + time.monotonic() - began["t"])
    try:
        [tp] = ensure_plans(rt)
        results = snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
        nbytes = copy_bytes(rt, tp.plan.table)
    finally:
        rt.close()
    bench.totals_match(kind, table)
    return sum(r.rows for r in results), read[0], nbytes


def log_run(bench: Bench, kind: str, changes: int, limit: int) -> tuple[int, float]:
    """(events, seconds) of `sync(until_caught_up)` over a backlog of `changes` changes."""
    name, table, half = f"limit_log_{kind}", "bench.backlog", changes // 2
    bench.fresh_table(kind, table, 0, [name])
    rt = bench.task(name, kind, table, pipeline={"checkpoint_after_events": 1000,
                                                "read_limit": {"rows_per_second": limit}})
    try:
        [tp] = ensure_plans(rt)
        snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])  # empty: the log starts here
        conn = bench.source(kind)
        for lo in range(1, half + 1, TX_ROWS):
            fill(kind, conn, table, lo, min(half, lo + TX_ROWS - 1))
        for lo in range(1, half + 1, TX_ROWS):
            run(conn, f"UPDATE {table} SET a = a + 1 WHERE id BETWEEN {lo} AND {min(half, lo + TX_ROWS - 1)}")
        conn.close()
        started = time.monotonic()
        report = sync(rt, until_caught_up=True)
        seconds = time.monotonic() - started
    finally:
        rt.close()
    bench.totals_match(kind, table)
    return report.events, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rows-limit", type=int, default=20_000)
    parser.add_argument("--bytes-limit", type=int, default=2_000_000)
    parser.add_argument("--changes", type=int, default=50_000)
    parser.add_argument("--events-limit", type=int, default=5_000)
    parser.add_argument("--dir", default="/tmp/cdc-bench-limit")
    args = parser.parse_args()
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o755)
    bench = Bench(base)
    print(f"{os.cpu_count()} cores; Spark local[*] (defaultParallelism {bench.spark.sparkContext.defaultParallelism})"
          f"; a table of {args.rows:,} rows (bigint key, int, varchar(64), decimal(12,2), timestamp, double)")
    try:
        for kind in ("mysql", "postgres"):
            direction = "mysql_to_pg" if kind == "mysql" else "pg_to_pg"
            bench.fresh_table(kind, "bench.limited", args.rows, [f"limit_rows_{kind}", f"limit_bytes_{kind}"])
            snapshot_run(bench, kind, args.rows, f"limit_warm_{kind}", {})  # unlimited: the first job is not measured
            rows, secs, nbytes = snapshot_run(bench, kind, args.rows, f"limit_rows_{kind}",
                                              {"rows_per_second": args.rows_limit})
            rate = rows / secs
            print(f"snapshot {direction}, rows_per_second {args.rows_limit:,}: {rows:,} rows read in {secs:.2f} s = "
                  f"{rate:,.0f} rows/s | ratio {rate / args.rows_limit:.3f}")
            rows, secs, nbytes = snapshot_run(bench, kind, args.rows, f"limit_bytes_{kind}",
                                              {"bytes_per_second": args.bytes_limit})
            rate = nbytes / secs
            print(f"snapshot {direction}, bytes_per_second {args.bytes_limit:,}: {nbytes:,} COPY bytes ({rows:,} rows)"
                  f" in {secs:.2f} s = {rate:,.0f} B/s | ratio {rate / args.bytes_limit:.3f}")
        for kind in ("mysql", "postgres"):
            direction = "mysql_to_pg" if kind == "mysql" else "pg_to_pg"
            events, secs = log_run(bench, kind, args.changes, args.events_limit)
            rate = events / secs
            print(f"log phase {direction}, rows_per_second {args.events_limit:,}: {events:,} changes applied in "
                  f"{secs:.2f} s = {rate:,.0f} events/s | ratio {rate / args.events_limit:.3f}")
    finally:
        bench.spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
