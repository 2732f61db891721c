"""Savepoint costs on a 1,000,000-row target, MySQL->PostgreSQL and PostgreSQL->PostgreSQL:

    python bench/savepoint.py [--rows 1000000] [--changes 200000] [--direction mysql|postgres|both]
                              [--dir /tmp/cdc-bench-savepoint]

Per direction: a --rows table is snapshotted (Spark) and synced; then
- without a savepoint: --changes updates (1,000 per transaction, keys spread over the table) applied by
  `sync --until-caught-up` in process: events/s;
- `savepoint create`: seconds (it copies nothing, so it must not grow with the table);
- the same number of updates (other keys) applied with the savepoint in place: events/s, and the write cost of
  the before-images as the throughput lost (1 - with/without);
- before-images held (rows) and `savepoint rollback`: seconds and keys restored (proportional to the changes);
- a sync replaying the log from the savepoint, then a check that the target's count and SUM(a) equal the source's.
Prints figures, never asserts; a mismatch is printed as MISMATCH.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import yaml

from cdc_assets.config import load_config
from cdc_assets.dev.servers import start_servers, stop_servers
from cdc_assets.engine import savepoints, target_savepoints
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets.sources.postgres.slot import drop_slot, publication_name, slot_name
from cdc_assets.spark.session import build_session
from cdc_assets.config import SparkConfig

TX_ROWS = 1000
PIPELINE = {"checkpoint_after_events": 1000, "checkpoint_interval_secs": 10.0}


def run(conn, sql: str, params: tuple = ()) -> list:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall()) if cur.description else []


def prepare(kind: str, mariadb, postgres, base: Path, rows: int) -> Path:
    server, db = (mariadb, "benchs") if kind == "mysql" else (postgres, "benchssrc")
    task = f"sp_{kind}"
    server.create_database(db)
    src = server.connect(db)
    if kind == "postgres":
        for slot in [r[0] for r in run(src, "SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE %s",
                                       (slot_name(task) + "%",))]:
            drop_slot(src, slot)
        run(src, f"DROP PUBLICATION IF EXISTS {publication_name(task)}")
        run(src, "CREATE SCHEMA IF NOT EXISTS benchs")
    run(src, "DROP TABLE IF EXISTS benchs.events")
    run(src, "CREATE TABLE benchs.events (id BIGINT PRIMARY KEY, a INT NOT NULL, b VARCHAR(64), c DECIMAL(12,2))")
    if kind == "mysql":
        run(src, f"INSERT INTO benchs.events SELECT seq, 0, CONCAT('row ', seq), seq / 100 FROM seq_1_to_{rows}")
    else:
        run(src, f"INSERT INTO benchs.events SELECT g, 0, 'row ' || g, g / 100.0 FROM generate_series(1, {rows}) g")
    src.close()
    target_db = f"warehouse_sp_{kind}"
    postgres.create_database(target_db)
    tgt = postgres.connect(target_db)
    run(tgt, "DROP SCHEMA IF EXISTS benchs CASCADE")
    run(tgt, "DROP SCHEMA IF EXISTS cdc_assets_meta CASCADE")
    tgt.close()
    state = base / f"state_{task}"
    os.system(f"rm -rf {state}")
    path = base / f"{task}.yaml"
    path.write_text(yaml.safe_dump({
        "task_id": task,
        "source": {"db_type": kind, "url": server.url(db), "tables": ["benchs.events"]},
        "target": {"db_type": "postgres", "url": postgres.url(target_db)},
        "snapshot": {"split_size": 250_000},
        "pipeline": PIPELINE,
        "runtime": {"data_dir": str(state)},
        "spark": {"master": "local[*]"},
    }))
    return path


def updates(kind: str, server, db: str, rows: int, changes: int, offset: int) -> None:
    """`changes` single-row updates in transactions of TX_ROWS, keys spread over the table by a stride."""
    conn = server.connect(db)
    stride = max(1, rows // changes)
    ids = [(offset + i * stride) % rows + 1 for i in range(changes)]
    for lo in range(0, len(ids), TX_ROWS):
        chunk = ids[lo:lo + TX_ROWS]
        run(conn, "BEGIN")
        with conn.cursor() as cur:
            cur.executemany("UPDATE benchs.events SET a = a + 1 WHERE id = %s", [(i,) for i in chunk])
        run(conn, "COMMIT")
    conn.close()


def timed_sync(rt: TaskRuntime) -> tuple[int, float]:
    began = time.monotonic()
    report = sync(rt, until_caught_up=True)
    return report.events, time.monotonic() - began


def totals(conn) -> tuple[int, int]:
    return tuple(int(v) for v in run(conn, "SELECT COUNT(*), COALESCE(SUM(a), 0) FROM benchs.events")[0])


def measure(kind: str, mariadb, postgres, base: Path, rows: int, changes: int, spark) -> dict:
    path = prepare(kind, mariadb, postgres, base, rows)
    server, db = (mariadb, "benchs") if kind == "mysql" else (postgres, "benchssrc")
    rt = TaskRuntime(load_config(path))
    rt.adopt_spark(spark)
    out: dict = {"direction": "mysql_to_pg" if kind == "mysql" else "pg_to_pg"}
    try:
        for tp in ensure_plans(rt):
            snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
        sync(rt, until_caught_up=True)

        updates(kind, server, db, rows, changes, 0)
        events, secs = timed_sync(rt)
        out["without"] = events / secs

        began = time.monotonic()
        savepoints.create_on(rt, "bench")
        out["create"] = time.monotonic() - began

        updates(kind, server, db, rows, changes, 7)
        events, secs = timed_sync(rt)
        out["with"] = events / secs
        out["images"] = sum(target_savepoints.storage(rt).values())

        began = time.monotonic()
        [report] = savepoints.rollback_on(rt, "bench")
        out["rollback"] = time.monotonic() - began
        out["restored"] = sum(report.restored.values())
        began = time.monotonic()
        sync(rt, until_caught_up=True)
        out["replay"] = time.monotonic() - began
        src, tgt = server.connect(db), postgres.connect(f"warehouse_sp_{kind}")
        out["ok"] = totals(src) == totals(tgt)
        if not out["ok"]:
            print(f"MISMATCH {out['direction']}: source {totals(src)}, target {totals(tgt)}")
        src.close()
        tgt.close()
        savepoints.delete_on(rt, "bench")
    finally:
        rt.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--direction", choices=("mysql", "postgres", "both"), default="both")
    parser.add_argument("--dir", default="/tmp/cdc-bench-savepoint")
    args = parser.parse_args()
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o755)
    mariadb, postgres = start_servers(base / "servers")
    spark, _ = build_session(SparkConfig(master="local[*]"), app_name="cdc_assets_bench_savepoint")
    results = []
    try:
        for kind in (("mysql", "postgres") if args.direction == "both" else (args.direction,)):
            results.append(measure(kind, mariadb, postgres, base, args.rows, args.changes, spark))
    finally:
        spark.stop()
        stop_servers(base / "servers")
    print(f"\n{os.cpu_count()} CPUs; {args.rows:,}-row target; {args.changes:,} updates per phase, "
          f"{TX_ROWS} per transaction; pipeline {PIPELINE}")
    print(f"{'direction':<12} {'create s':>9} {'ev/s without':>12} {'ev/s with':>10} {'write cost':>10} "
          f"{'images':>8} {'rollback s':>10} {'restored':>9} {'replay s':>9}  check")
    for r in results:
        cost = 1 - r["with"] / r["without"]
        print(f"{r['direction']:<12} {r['create']:>9.3f} {r['without']:>12,.0f} {r['with']:>10,.0f} {cost:>10.1%} "
              f"{r['images']:>8,} {r['rollback']:>10.3f} {r['restored']:>9,} {r['replay']:>9.1f}  "
              f"{'ok' if r['ok'] else 'MISMATCH'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
