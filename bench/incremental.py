"""Incremental throughput and lag, MySQL->PostgreSQL and PostgreSQL->PostgreSQL.

    python bench/incremental.py [--changes 1000000] [--rate 2000] [--seconds 60] [--dir /tmp/cdc-bench-incr]

Per direction: the catch-up rate of `sync --until-caught-up` (in process, no start-up) on a backlog of
`--changes` row changes (half inserts, then half updates, in transactions of 10,000), the read rate of the log
library alone on the same backlog (the limit for this language), their ratio; then the lag of a running
`cdc-assets sync` while a writer commits `--rate` changes/s for `--seconds` s: per row, the target's commit
time (a trigger's clock_timestamp) minus the source commit time, p50/p99/max. Peak RSS of this process.
"""
from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg2
import yaml
from psycopg2.extras import LogicalReplicationConnection
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

from cdc_assets.config import load_config
from cdc_assets.dev.servers import start_servers
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits

TX = 10_000
SHAPE = "id BIGINT PRIMARY KEY, a INT, b VARCHAR(64), c DECIMAL(12,2), d {ts}, written_at DOUBLE PRECISION"


def source_conn(kind, servers):
    mariadb, postgres = servers
    if kind == "mysql":
        conn = mariadb.connect()
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS benchi")
            cur.execute("USE benchi")
        return conn
    postgres.create_database("benchisrc")
    conn = postgres.connect("benchisrc")
    conn.autocommit = True
    return conn


def reset(kind, servers, src, base: Path) -> Path:
    mariadb, postgres = servers
    with src.cursor() as cur:
        if kind == "postgres":
            cur.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'cdc_assets_%' OR slot_name = 'bench_raw'")
            cur.execute("CREATE SCHEMA IF NOT EXISTS benchi")
        cur.execute("DROP TABLE IF EXISTS benchi.events")
        cur.execute(f"CREATE TABLE benchi.events ({SHAPE.format(ts='DATETIME(6)' if kind == 'mysql' else 'TIMESTAMP(6)')})")
    postgres.create_database("warehouse")
    tgt = postgres.connect("warehouse")
    tgt.autocommit = True
    with tgt.cursor() as cur:
        cur.execute("DROP SCHEMA IF EXISTS benchi CASCADE")
        cur.execute("DROP SCHEMA IF EXISTS cdc_assets_meta CASCADE")
    tgt.close()
    task = f"incr_{kind}"
    state = base / f"state_{task}"
    subprocess.run(["rm", "-rf", str(state)], check=True)
    path = base / f"{task}.yaml"
    url = mariadb.url() if kind == "mysql" else postgres.url("benchisrc")
    path.write_text(yaml.safe_dump({
        "task_id": task, "source": {"db_type": kind, "url": url, "tables": ["benchi.events"]},
        "target": {"db_type": "postgres", "url": postgres.url("warehouse")},
        "resumer": {"resume_type": "from_target"}, "runtime": {"data_dir": str(state)},
        "pipeline": {"checkpoint_after_events": 1000, "checkpoint_interval_secs": 1},
    }))
    return path


def backlog(kind, src, changes: int) -> None:
    half = changes // 2
    with src.cursor() as cur:
        for lo in range(1, half + 1, TX):
            hi = min(half, lo + TX - 1)
            if kind == "mysql":
                cur.execute(f"INSERT INTO benchi.events SELECT seq, seq % 1000, CONCAT('row ', seq), seq / 100, "
                            f"TIMESTAMP('2024-01-01') + INTERVAL seq SECOND, 0 FROM seq_{lo}_to_{hi}")
            else:
                cur.execute(f"INSERT INTO benchi.events SELECT g, g % 1000, 'row ' || g, g / 100.0, "
                            f"TIMESTAMP '2024-01-01' + g * INTERVAL '1 second', 0 FROM generate_series({lo}, {hi}) g")
            if kind == "mysql":
                src.commit()
        for lo in range(1, half + 1, TX):
            cur.execute("UPDATE benchi.events SET a = a + 1 WHERE id BETWEEN %s AND %s", (lo, lo + TX - 1))
            if kind == "mysql":
                src.commit()


def raw_mysql(url, start, end) -> float:
    began, rows = time.monotonic(), 0
    stream = BinLogStreamReader(
        connection_settings={"host": url.host, "port": url.port, "user": url.user, "passwd": url.password},
        server_id=4242, blocking=False, resume_stream=True, log_file=start.file, log_pos=start.pos,
        only_events=[WriteRowsEvent, UpdateRowsEvent], only_schemas=["benchi"], is_mariadb=False)
    for event in stream:
        rows += len(event.rows)  # decodes every row
        if (stream.log_file, stream.log_pos) >= (end.file, end.pos):
            break
    stream.close()
    return rows / (time.monotonic() - began)


def raw_postgres(url, slot_lsn_end, publication) -> float:
    conn = psycopg2.connect(host=url.host, port=url.port, user=url.user or None, password=url.password or None,
                            dbname=url.database, connection_factory=LogicalReplicationConnection)
    cur = conn.cursor()
    began, rows = time.monotonic(), 0
    cur.start_replication(slot_name="bench_raw", decode=False,
                          options={"proto_version": "1", "publication_names": publication})
    while True:
        msg = cur.read_message()
        if msg is None:
            if cur.wal_end >= slot_lsn_end:
                break
            time.sleep(0.01)
            continue
        if msg.payload[:1] in (b"I", b"U"):
            rows += 1
        if msg.payload[:1] == b"C":
            cur.send_feedback(flush_lsn=msg.data_start)
    elapsed = time.monotonic() - began
    conn.close()
    return rows / elapsed


def catch_up(kind, servers, base: Path, changes: int) -> dict:
    src = source_conn(kind, servers)
    path = reset(kind, servers, src, base)
    config = load_config(path)
    rt = TaskRuntime(config)
    for tp in ensure_plans(rt):  # publication and slot first, then an (empty) snapshot: the watermarks
        snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
    if kind == "postgres":
        with src.cursor() as cur:
            cur.execute("SELECT pg_create_logical_replication_slot('bench_raw', 'pgoutput')")
    start = rt.source.current_position()
    backlog(kind, src, changes)
    end = rt.source.current_position()
    if kind == "mysql":
        raw = raw_mysql(config.source.db_url, start, end)
    else:
        from cdc_assets.sources.postgres.replication import publication_name
        raw = raw_postgres(config.source.db_url, end.lsn, publication_name(config.task_id))
        with src.cursor() as cur:
            cur.execute("SELECT pg_drop_replication_slot('bench_raw')")
    began = time.monotonic()
    report = sync(rt, until_caught_up=True)
    seconds = time.monotonic() - began
    rt.close()
    tgt = servers[1].connect("warehouse")
    with tgt.cursor() as cur, src.cursor() as scur:
        cur.execute("SELECT COUNT(*), SUM(a) FROM benchi.events")
        got = cur.fetchone()
        scur.execute("SELECT COUNT(*), SUM(a) FROM benchi.events")
        want = scur.fetchone()
    tgt.close()
    src.close()
    return {"path": path, "events": report.events, "seconds": seconds, "rate": report.events / seconds, "raw": raw,
            "same": tuple(map(int, got)) == tuple(map(int, want))}


def steady(kind, servers, path: Path, rate: int, seconds: int) -> dict:
    tgt = servers[1].connect("warehouse")
    tgt.autocommit = True
    with tgt.cursor() as cur:
        cur.execute("ALTER TABLE benchi.events ADD COLUMN IF NOT EXISTS applied_at double precision")
        cur.execute("CREATE OR REPLACE FUNCTION benchi.stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    "NEW.applied_at := extract(epoch from clock_timestamp()); RETURN NEW; END $$")
        cur.execute("DROP TRIGGER IF EXISTS stamp ON benchi.events")
        cur.execute("CREATE TRIGGER stamp BEFORE INSERT OR UPDATE ON benchi.events FOR EACH ROW EXECUTE FUNCTION benchi.stamp()")
    proc = subprocess.Popen([sys.executable, "-m", "cdc_assets.cli", "--config", str(path), "sync"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(3)
    src = source_conn(kind, servers)
    per_tick, first_id, written = rate // 20, 10_000_000, 0
    began = time.monotonic()
    with src.cursor() as cur:
        while time.monotonic() - began < seconds:
            tick = time.monotonic()
            lo = first_id + written
            ids = list(range(lo, lo + per_tick))
            if kind == "postgres":
                cur.execute("BEGIN")
            now = time.time()
            cur.executemany("INSERT INTO benchi.events (id, a, b, c, d, written_at) VALUES (%s, 1, 'w', 1, '2024-01-01', %s)",
                            [(i, now) for i in ids])
            cur.execute("COMMIT") if kind == "postgres" else src.commit()
            written += per_tick
            time.sleep(max(0.0, 0.05 - (time.monotonic() - tick)))
    achieved = written / (time.monotonic() - began)
    deadline = time.monotonic() + 60
    with tgt.cursor() as cur:
        while time.monotonic() < deadline:
            cur.execute("SELECT COUNT(*) FROM benchi.events WHERE id >= %s", (first_id,))
            if cur.fetchone()[0] >= written:
                break
            time.sleep(0.2)
        cur.execute("SELECT applied_at - written_at FROM benchi.events WHERE id >= %s ORDER BY 1", (first_id,))
        lags = [r[0] for r in cur.fetchall()]
    os.killpg(proc.pid, signal.SIGTERM)
    code = proc.wait(60)
    src.close()
    tgt.close()
    pick = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))] if lags else float("nan")  # noqa: E731
    return {"p50": pick(0.5), "p99": pick(0.99), "max": lags[-1] if lags else float("nan"), "rate": achieved,
            "rows": len(lags), "written": written, "exit": code}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--changes", type=int, default=1_000_000)
    p.add_argument("--rate", type=int, default=2000)
    p.add_argument("--seconds", type=int, default=60)
    p.add_argument("--dir", default="/tmp/cdc-bench-incr")
    p.add_argument("--direction", choices=["mysql", "postgres", "both"], default="both")
    args = p.parse_args()
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    servers = start_servers(base / "servers")
    print(f"{os.cpu_count()} CPUs; {args.changes:,} changes per backlog; {args.rate}/s for {args.seconds} s")
    for kind in (["mysql", "postgres"] if args.direction == "both" else [args.direction]):
        name = "MySQL->PostgreSQL" if kind == "mysql" else "PostgreSQL->PostgreSQL"
        c = catch_up(kind, servers, base, args.changes)
        print(f"{name} catch-up: {c['events']:,} changes in {c['seconds']:.1f} s = {c['rate']:,.0f} events/s; "
              f"raw reader {c['raw']:,.0f} rows/s; ratio {c['rate'] / c['raw']:.2f}"
              + ("" if c["same"] else "   MISMATCH between source and target"))
        s = steady(kind, servers, c["path"], args.rate, args.seconds)
        print(f"{name} steady state: writer {s['rate']:,.0f} changes/s, {s['rows']:,}/{s['written']:,} rows arrived; "
              f"lag p50 {s['p50']:.3f} s, p99 {s['p99']:.3f} s, max {s['max']:.3f} s; sync exit code {s['exit']}")
    print(f"peak RSS of the bench process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
