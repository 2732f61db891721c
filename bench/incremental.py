"""Incremental throughput and lag: `cdc-assets sync`, MySQL->PostgreSQL and PostgreSQL->PostgreSQL, beside the
read rate of the log library alone on the same backlog (the limit for a Python reader on this machine).

    python bench/incremental.py [--changes 1000000] [--rate 2000] [--seconds 60] [--direction mysql|postgres|both]
                                [--dir /tmp/cdc-bench-incr] [--big-txn [N]] [--targets N] [--tx-rows N] [--dagster]

Per direction, on an empty table snapshotted first (so that the log is read from the snapshot's low watermark):
- catch-up: a backlog of --changes row changes (half inserts, then half updates, --tx-rows per transaction, 10,000
  by default; small ones show whether batches still fill up to checkpoint_after_events) applied
  by `sync --until-caught-up`, in process (start-up excluded) and once through the CLI (start-up included), each
  by its own task into its own target database;
- raw read: the same backlog read by the log library alone, pymysqlreplication (rows decoded), or for PostgreSQL
  psycopg2 from a pgoutput slot with our decoder's tuple decode alone (`pgoutput.decode` of every message: the
  columns' texts, no casts, no events, no target); ratio = catch-up / raw;
- apply alone: the same backlog applied in process by a third task whose reader read it all into memory before
  handing out the first change: the applier and the target alone, the catch-up with a reader that cost nothing,
  printed beside 0.6 of the raw figure;
- bound (PostgreSQL): the raw reader's CPU (our decoder, the walsender) plus the apply alone's (the sync, the
  target) over this machine's CPUs: the most a catch-up could reach with every CPU busy all the time, as a ratio
  of the raw figure;
- steady state: a running `cdc-assets sync` while a writer commits --rate changes/s for --seconds s; the lag of
  a row is the target's clock at the commit of the transaction that wrote it (a deferred constraint trigger
  stamps each target transaction as it commits) minus the client clock just before the source statement, which
  commits on its own (so the source statement's own time is counted too).
With --dagster the steady state is applied the Dagster way instead: a `dagster-daemon` (the repository's
dagster.yaml and workspace.yaml) whose sensor `<task>_incremental_launcher` launches bounded runs of the incremental
job (each applies the log up to the end it saw at its start), one at a time; the lag then holds the sensor interval
(15 s) and each run's process start.
With --targets N the in-process catch-up and the steady run write to N PostgreSQL target databases (one task,
`targets:`, commit_policy all): events/s counts the source's changes, each applied to every target.
With --big-txn N (N defaults to 2,000,000) instead: a table of N rows is snapshotted, then ONE transaction
updates all N rows, and `sync --until-caught-up` (CLI) applies it: seconds, events/s and the peak RSS of the
sync process, beside the part size (pipeline.transaction_part_events) that bounds it.
The PostgreSQL source and the target share one server, as in bench/snapshot.py. Prints figures, never asserts;
a target whose row count or SUM(a) differs from the source's is reported as MISMATCH.
"""
from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import resource
import select
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
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

import cdc_assets
from cdc_assets.config import PipelineConfig, load_config
from cdc_assets.dev.processes import stop_groups
from cdc_assets.dev.servers import start_servers, stop_servers
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets.spark.session import build_session
from cdc_assets.sources.postgres import pgoutput
from cdc_assets.sources.postgres.slot import drop_slot, publication_name, slot_name
from server_cpu import ServerCpu
from settle import quiet

# The checkout whose package this process imported: the CLI runs must measure the same code.
REPO = Path(cdc_assets.__file__).resolve().parents[1]
TX_ROWS = 10_000  # --tx-rows: changes per backlog transaction
TICK = 0.05  # the steady writer commits one transaction per tick
RAW_SLOT = "cdc_bench_raw"
RAW_CPU: dict[str, float] = {}  # CPU seconds of the last PostgreSQL raw read: "reader" (this process), "walsender"
RAW_SERVER_ID = 4_242_424  # any id no other replica of the server uses
PIPELINE = {"checkpoint_after_events": 1000, "checkpoint_interval_secs": 10.0, "exactly_once": False}
SHAPE = "id BIGINT PRIMARY KEY, a INT, b VARCHAR(64), c DECIMAL(12,2), d {ts}, written_at DOUBLE PRECISION"
TEXT = "forty characters of text for the row "
NAN = float("nan")


class Direction:
    """benchi.events in a source database, read by three tasks: `task` (in process, then the steady run) into
    database warehouse, `task_cli` (the CLI catch-up) into warehouse_cli, `task_alone` (the apply alone) into
    warehouse_alone."""

    def __init__(self, kind: str, mariadb, postgres, base: Path) -> None:
        self.kind, self.mariadb, self.postgres, self.base = kind, mariadb, postgres, base
        self.name = "mysql_to_pg" if kind == "mysql" else "pg_to_pg"
        self.task, self.task_cli, self.task_alone = f"incr_{kind}", f"incr_{kind}_cli", f"incr_{kind}_alone"
        self.server, self.db = (mariadb, "benchi") if kind == "mysql" else (postgres, "benchisrc")
        self.server.create_database(self.db)

    def connect(self):  # autocommit: every statement is one source transaction
        return self.server.connect(self.db)

    def config(self, task: str, target_db: str, targets: int = 1) -> Path:
        path = self.base / f"{task}.yaml"
        more = [{"name": f"t{i}", "db_type": "postgres", "url": self.postgres.url(db)}
                for i, db in enumerate(extra_targets(target_db, targets), start=2)]
        path.write_text(yaml.safe_dump({
            "task_id": task,
            "source": {"db_type": self.kind, "url": self.server.url(self.db), "tables": ["benchi.events"]},
            "targets": [{"name": "t1", "db_type": "postgres", "url": self.postgres.url(target_db)}, *more],
            "pipeline": PIPELINE,
            "runtime": {"data_dir": str(self.base / f"state_{task}")},
            "spark": {"master": "local[*]"},
        }))
        return path


TARGETS = 1  # --targets: PostgreSQL target databases of the in-process task


def extra_targets(target_db: str, targets: int) -> list[str]:
    return [f"{target_db}_t{i}" for i in range(2, targets + 1)]


def run(conn, sql: str, params: tuple = ()) -> list:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall()) if cur.description else []


def reset(d: Direction) -> None:
    src = d.connect()
    if d.kind == "postgres":  # an earlier run's slots would hold WAL and start from their old positions
        run(src, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ANY(%s)",
            ([slot_name(d.task), slot_name(d.task_cli), slot_name(d.task_alone), RAW_SLOT],))
        for task in (d.task, d.task_cli, d.task_alone):
            run(src, f"DROP PUBLICATION IF EXISTS {publication_name(task)}")
        run(src, "CREATE SCHEMA IF NOT EXISTS benchi")
    run(src, "DROP TABLE IF EXISTS benchi.events")
    run(src, f"CREATE TABLE benchi.events ({SHAPE.format(ts='DATETIME(6)' if d.kind == 'mysql' else 'TIMESTAMP(6)')})")
    src.close()
    for db in ("warehouse", "warehouse_cli", "warehouse_alone", *extra_targets("warehouse", TARGETS)):
        d.postgres.create_database(db)
        tgt = d.postgres.connect(db)
        run(tgt, "DROP SCHEMA IF EXISTS benchi CASCADE")
        tgt.close()
    for task in (d.task, d.task_cli, d.task_alone):
        subprocess.run(["rm", "-rf", str(d.base / f"state_{task}")], check=True)


def snapshot_empty(config: Path, spark):
    """Plan (for PostgreSQL: publication and slot) and snapshot the empty table: the task gets its watermarks."""
    rt = TaskRuntime(load_config(config))
    rt.adopt_spark(spark)
    try:
        for tp in ensure_plans(rt):
            snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
    finally:
        rt.close()


def log_end(d: Direction):
    conn = d.connect()
    if d.kind == "mysql":
        file, pos = run(conn, "SHOW MASTER STATUS")[0][:2]
        end = (file, int(pos))
    else:
        high, low = run(conn, "SELECT pg_current_wal_lsn()::text")[0][0].split("/")
        end = (int(high, 16) << 32) + int(low, 16)
    conn.close()
    return end


def backlog(d: Direction, half: int) -> None:
    conn = d.connect()
    for lo in range(1, half + 1, TX_ROWS):
        hi = min(half, lo + TX_ROWS - 1)
        if d.kind == "mysql":
            run(conn, f"INSERT INTO benchi.events SELECT seq, MOD(seq, 1000), CONCAT('{TEXT}', LPAD(seq, 7, '0')), "
                      f"seq / 100, TIMESTAMP('2024-01-01') + INTERVAL seq SECOND + INTERVAL seq MICROSECOND, %s "
                      f"FROM seq_{lo}_to_{hi}", (time.time(),))
        else:
            run(conn, f"INSERT INTO benchi.events SELECT g, mod(g, 1000), '{TEXT}' || lpad(g::text, 7, '0'), "
                      f"g / 100.0, TIMESTAMP '2024-01-01' + g * INTERVAL '1 second' + g * INTERVAL '1 microsecond', "
                      f"%s FROM generate_series({lo}, {hi}) g", (time.time(),))
    for lo in range(1, half + 1, TX_ROWS):
        run(conn, "UPDATE benchi.events SET a = a + 1, written_at = %s WHERE id BETWEEN %s AND %s",
            (time.time(), lo, min(half, lo + TX_ROWS - 1)))
    if d.kind == "postgres":  # now, not by an autovacuum during a timed case: the updates left 500,000 dead rows
        run(conn, "VACUUM (ANALYZE) benchi.events")
    conn.close()


def raw_mysql(d: Direction, start: tuple[str, int]) -> tuple[int, float]:
    """Rows decoded by pymysqlreplication from `start` to the binlog's end (nothing else writes meanwhile)."""
    began, rows = time.monotonic(), 0
    # is_mariadb=False even on MariaDB: with True and no GTID the library ignores log_file/log_pos.
    stream = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": d.mariadb.port, "user": d.mariadb.user,
                             "password": d.mariadb.password},
        server_id=RAW_SERVER_ID, blocking=False, resume_stream=True, log_file=start[0], log_pos=start[1],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], only_schemas=["benchi"],
        only_tables=["events"], is_mariadb=False, enable_logging=False)
    try:
        for event in stream:
            rows += len(event.rows)  # `rows` is lazy: this is what decodes the values
    finally:
        stream.close()
    return rows, time.monotonic() - began


def raw_postgres(d: Direction, end_lsn: int) -> tuple[int, float]:
    """Insert/Update messages of RAW_SLOT until the server has decoded past `end_lsn`, each decoded by our
    pgoutput decoder (its tuple data to the columns' texts, as pymysqlreplication decodes a row; no casts to
    Python types, no events); then drops the slot. Its CPU seconds (this process's, the walsender's) go to
    RAW_CPU."""
    with ServerCpu(d.postgres.pid, d.mariadb.pid) as servers:
        began, rows, own = time.monotonic(), 0, _own_cpu()
        conn = psycopg2.connect(host="127.0.0.1", port=d.postgres.port, user=d.postgres.user, dbname=d.db,
                                connection_factory=LogicalReplicationConnection)
        try:
            cur = conn.cursor()
            cur.start_replication(slot_name=RAW_SLOT, decode=False,
                                  options={"proto_version": "1", "publication_names": publication_name(d.task)})
            while cur.wal_end < end_lsn:  # a keepalive's wal_end is how far decoding got
                msg = cur.read_message()
                if msg is None:
                    select.select([cur], [], [], 0.2)
                    continue
                message = pgoutput.decode(msg.payload)
                if isinstance(message, (pgoutput.Insert, pgoutput.Update)):
                    rows += 1
                elif isinstance(message, pgoutput.Commit):
                    cur.send_feedback(flush_lsn=msg.data_start)
        finally:
            conn.close()
        seconds, own = time.monotonic() - began, _own_cpu() - own  # not the sampler's stop
    RAW_CPU.update(reader=own, walsender=servers.seconds.get("walsender", 0.0))
    admin = d.connect()
    drop_slot(admin, RAW_SLOT)  # waits for the walsender of the closed connection to let go of it
    admin.close()
    return rows, seconds


def totals(conn) -> tuple[int, int]:
    count, total = run(conn, "SELECT COUNT(*), COALESCE(SUM(a), 0) FROM benchi.events")[0]
    return int(count), int(total)


def verify(label: str, d: Direction, target_db: str) -> bool:
    src, tgt = d.connect(), d.postgres.connect(target_db)
    want, got = totals(src), totals(tgt)
    src.close(), tgt.close()
    if want != got:
        print(f"!!!!! MISMATCH {label}: source (rows, SUM(a)) = {want}, target {target_db} = {got} !!!!!")
    return want == got


def start_cli(d: Direction, config: Path, log: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    with open(d.base / f"{log}.log", "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "cdc_assets.cli", "--config", str(config), "sync", *args],
                                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


def reap(proc: subprocess.Popen, timeout: float) -> tuple[int, float]:
    """Exit code and peak RSS (MiB) of the child, from its VmHWM polled: a child's ru_maxrss starts at its
    parent's size at fork (Linux keeps it across exec), and this process is bigger than a sync."""
    deadline, peak_kib = time.monotonic() + timeout, 0
    while True:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text().splitlines()
            peak_kib = max([peak_kib] + [int(line.split()[1]) for line in status if line.startswith("VmHWM:")])
        except OSError:
            pass
        if proc.poll() is not None:
            return proc.returncode, peak_kib / 1024
        if time.monotonic() > deadline:
            print(f"  !!!!! sync pid {proc.pid} did not exit within {timeout:.0f} s: killed")
            proc.kill()
            deadline = float("inf")
        time.sleep(0.05)


def catch_up(d: Direction, changes: int) -> dict:
    config, config_cli = d.config(d.task, "warehouse", TARGETS), d.config(d.task_cli, "warehouse_cli")
    config_alone = d.config(d.task_alone, "warehouse_alone")
    spark, _ = build_session(load_config(config).spark)
    for each in (config, config_cli, config_alone):
        snapshot_empty(each, spark)
    spark.stop()
    if d.kind == "postgres":  # after the publication (planning made it), before the backlog
        src = d.connect()
        run(src, "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (RAW_SLOT,))
        src.close()
    start = log_end(d)
    backlog(d, changes // 2)
    quiet(d.mariadb, d.postgres)
    raw_rows, raw_secs = raw_mysql(d, start) if d.kind == "mysql" else raw_postgres(d, log_end(d))
    quiet(d.mariadb, d.postgres)
    rt = TaskRuntime(load_config(config))
    try:
        with ServerCpu(d.postgres.pid, d.mariadb.pid) as servers:
            began, own = time.monotonic(), _own_cpu()
            report = sync(rt, until_caught_up=True)
            seconds, own = time.monotonic() - began, _own_cpu() - own
    finally:
        rt.close()
    ok = all([verify(f"{d.name} in-process catch-up", d, db) for db in ["warehouse", *extra_targets("warehouse", TARGETS)]])
    quiet(d.mariadb, d.postgres)
    began = time.monotonic()
    code, cli_rss = reap(start_cli(d, config_cli, f"{d.name}_cli_catch_up", "--until-caught-up"), 3600)
    cli_secs = time.monotonic() - began
    ok = verify(f"{d.name} CLI catch-up", d, "warehouse_cli") and ok and code == 0
    total = changes // 2 * 2
    r = {"rate": total / seconds, "raw": raw_rows / raw_secs, "cli_secs": cli_secs, "cli_rss": cli_rss,
         "self_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "config": config,
         "ok": ok and report.events == total == raw_rows}
    print(f"{d.name} catch-up of {total:,} changes into {TARGETS} target(s): in process {seconds:.1f} s = {r['rate']:,.0f} events/s "
          f"({report.events:,} events, {report.batches:,} batches) | raw reader {raw_rows:,} rows in "
          f"{raw_secs:.1f} s = {r['raw']:,.0f} rows/s | ratio {r['rate'] / r['raw']:.2f} | CLI end-to-end "
          f"{cli_secs:.1f} s = {total / cli_secs:,.0f} events/s, exit {code}, peak RSS {cli_rss:,.0f} MiB")
    print(f"  peak RSS of this process (in-process catch-up included) so far: {r['self_rss']:,.0f} MiB")
    cpu_report(total, seconds, own, servers.seconds)
    quiet(d.mariadb, d.postgres)
    r["ok"] = apart(apply_alone, d, config_alone, total, r["raw"]) and r["ok"]
    return r


def apart(case, *args) -> bool:
    """`case(*args)` in a forked child: the memory it holds (the apply alone's backlog) stays out of this process's
    peak RSS, which the table reports for the in-process catch-up."""
    child = multiprocessing.get_context("fork").Process(target=lambda: sys.exit(0 if case(*args) else 1))
    child.start()
    child.join()
    return child.exitcode == 0


class _ReadBeforehand:
    """A task's log reader whose items are all read into memory before the first is handed out: the sync then
    runs as with a reader that cost nothing, and `began` is when its applying began. Acknowledgements are kept
    for `release`: with its stream ended, the reader would advance the slot by SQL after every batch, which
    decodes WAL again, where a streaming reader sends a feedback message."""

    def __init__(self, reader, d: Direction) -> None:
        self.reader, self.d = reader, d
        self.began, self.own, self.servers, self.acknowledged = NAN, NAN, None, None

    def read(self, *args, **kwargs):
        items = list(self.reader.read(*args, **kwargs))
        gc.freeze()  # out of the collector's sight: holding them must not slow the apply being measured
        self.servers = ServerCpu(self.d.postgres.pid, self.d.mariadb.pid).__enter__()
        self.began, self.own = time.monotonic(), _own_cpu()
        yield from items

    def acknowledge(self, position) -> None:
        self.acknowledged = position

    def release(self) -> None:
        if self.acknowledged is not None:
            self.reader.acknowledge(self.acknowledged)

    def __getattr__(self, name):
        return getattr(self.reader, name)


def apply_alone(d: Direction, config: Path, total: int, raw: float) -> bool:
    """The same backlog applied by the sync from memory (`_ReadBeforehand`): the target and the applier alone,
    what the catch-up would take with a reader that cost nothing, beside what 0.6 of the raw reader asks."""
    rt = TaskRuntime(load_config(config))
    reader, readers = rt.log.reader, []

    def read_beforehand(*args, **kwargs) -> _ReadBeforehand:
        readers.append(_ReadBeforehand(reader(*args, **kwargs), d))
        return readers[-1]

    rt.log.reader = read_beforehand
    try:
        report = sync(rt, until_caught_up=True)
        [alone] = readers  # one session: no restart
        seconds, own = time.monotonic() - alone.began, _own_cpu() - alone.own
    finally:
        for each in readers:
            if each.servers is not None:
                each.servers.__exit__(None, None, None)
            each.release()
        rt.close()
        gc.unfreeze()
    ok = verify(f"{d.name} apply alone", d, "warehouse_alone") and report.events == total
    used = {k: v for k, v in sorted(alone.servers.seconds.items(), key=lambda kv: -kv[1]) if v >= 0.05}
    print(f"  apply alone (the backlog read into memory first, then applied by the sync: a reader that cost "
          f"nothing): {seconds:.1f} s = {total / seconds:,.0f} events/s, ratio {total / seconds / raw:.2f} of the raw "
          f"reader ({0.6 * raw:,.0f} events/s is 0.6 of it) | CPU s: sync {own:.1f}, "
          + ", ".join(f"{name} {value:.1f}" for name, value in used.items())
          + f" | peak RSS holding the backlog {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB",
          flush=True)
    if d.kind == "postgres":
        bound(total, raw, own + sum(alone.servers.seconds.values()))
    return ok


def bound(events: int, raw: float, applying: float) -> None:
    """The most a catch-up can reach on this machine's cores: it decodes every message as the raw reader does
    (the raw reader's CPU: our decoder and the walsender; building events costs more) and applies what the apply
    alone applied (its CPU: the sync and the target), so even with every core busy all the time it takes their sum
    over the cores."""
    cores = os.cpu_count() or 1
    decoding = RAW_CPU["reader"] + RAW_CPU["walsender"]
    rate = events / ((decoding + applying) / cores)
    print(f"  bound: a catch-up whose reading cost what the raw reader's did ({decoding:.1f} CPU s: our decoder "
          f"{RAW_CPU['reader']:.1f}, walsender {RAW_CPU['walsender']:.1f}) and whose applying cost what the apply "
          f"alone's did ({applying:.1f} CPU s: sync and target), on {cores} CPUs every one busy all the time: at most "
          f"{rate:,.0f} events/s = ratio {rate / raw:.2f} of the raw reader", flush=True)


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_report(events: int, seconds: float, own: float, servers: dict[str, float]) -> None:
    """Where the in-process catch-up's CPU went, and what that leaves: the sync's Python runs its reader and its
    applier under one GIL, so `own` bounds it alone; the servers' seconds bound it on this machine's cores even
    with a Python that cost nothing."""
    used = {"sync process (one GIL)": own, **{k: v for k, v in sorted(servers.items(), key=lambda kv: -kv[1])
                                              if v >= 0.05}}
    total, cores = sum(used.values()), os.cpu_count() or 1
    floor = sum(servers.values()) / cores
    print(f"  CPU s of the in-process catch-up ({seconds:.1f} s on {cores} CPUs, {total / seconds / cores:.0%} busy): "
          + ", ".join(f"{name} {value:.1f}" for name, value in used.items()))
    print(f"  the servers' CPU alone takes >= {floor:.1f} s on {cores} CPUs: at most {events / floor:,.0f} events/s "
          f"with a sync that cost nothing; at most {events / max(floor, total / cores, own):,.0f} events/s with this "
          f"sync's CPU perfectly overlapped")


def big_transaction(d: Direction, rows: int) -> dict:
    """A table of `rows` rows, snapshotted; then one transaction updating every row, applied by the CLI."""
    conn = d.connect()
    if d.kind == "mysql":
        run(conn, f"INSERT INTO benchi.events SELECT seq, MOD(seq, 1000), CONCAT('{TEXT}', LPAD(seq, 7, '0')), "
                  f"seq / 100, TIMESTAMP('2024-01-01') + INTERVAL seq SECOND, 0 FROM seq_1_to_{rows}")
    else:
        run(conn, f"INSERT INTO benchi.events SELECT g, mod(g, 1000), '{TEXT}' || lpad(g::text, 7, '0'), g / 100.0, "
                  f"TIMESTAMP '2024-01-01' + g * INTERVAL '1 second', 0 FROM generate_series(1, {rows}) g")
    config = d.config(d.task_cli, "warehouse_cli")
    spark, _ = build_session(load_config(config).spark)
    snapshot_empty(config, spark)
    spark.stop()
    began = time.monotonic()
    run(conn, "UPDATE benchi.events SET a = a + 1, written_at = %s", (time.time(),))  # autocommit: one transaction
    conn.close()
    print(f"{d.name}: one transaction updating {rows:,} rows committed in {time.monotonic() - began:.1f} s")
    began = time.monotonic()
    code, rss = reap(start_cli(d, config, f"{d.name}_cli_big_txn", "--until-caught-up"), 7200)
    seconds = time.monotonic() - began
    r = {"secs": seconds, "rate": rows / seconds, "rss": rss, "ok": verify(f"{d.name} big transaction", d,
                                                                         "warehouse_cli") and code == 0}
    print(f"{d.name} big transaction of {rows:,} updates: CLI end-to-end {seconds:.1f} s = {r['rate']:,.0f} events/s, "
          f"exit {code}, peak RSS {rss:,.0f} MiB")
    return r


def writer(d: Direction, rate: int, seconds: float, first_new: int, existing: int, out: dict) -> None:
    """Every TICK one upsert statement (one transaction): half new ids (inserts), half existing ids (updates)."""
    per_tick = max(2, round(rate * TICK))
    inserts = per_tick // 2
    updates = min(per_tick - inserts, existing)  # an id twice in one ON CONFLICT statement is an error
    rows = ", ".join(["(%s, %s, 'steady', 1.25, '2024-06-01 12:00:00.5', %s)"] * (inserts + updates))
    sql = f"INSERT INTO benchi.events (id, a, b, c, d, written_at) VALUES {rows} " + (
        "ON DUPLICATE KEY UPDATE a = a + 1, written_at = VALUES(written_at)" if d.kind == "mysql" else
        "ON CONFLICT (id) DO UPDATE SET a = benchi.events.a + 1, written_at = EXCLUDED.written_at")
    conn = d.connect()
    next_new, next_old, written, ticks = first_new, 0, 0, int(seconds / TICK)
    began = time.monotonic()
    for k in range(ticks):
        time.sleep(max(0.0, began + k * TICK - time.monotonic()))
        ids = list(range(next_new, next_new + inserts)) + [(next_old + j) % existing + 1 for j in range(updates)]
        next_new, next_old = next_new + inserts, next_old + updates
        now = time.time()  # the statement commits on its own right after
        run(conn, sql, tuple(v for i in ids for v in (i, i % 1000, now)))
        written += len(ids)
    time.sleep(max(0.0, began + ticks * TICK - time.monotonic()))
    out.update(written=written, secs=time.monotonic() - began)
    conn.close()


# A row's lag: from the source statement to the commit of the target transaction that wrote it last. `xmin` is that
# transaction's 32-bit id; txid_current() is the same id with its epoch above it.
STAMPED = "benchi.events e JOIN benchi.commit_stamps s ON mod(s.xid, 4294967296) = e.xmin::text::bigint"
LAG = "s.committed_at - e.written_at"


def stamp_commits(tgt) -> None:
    """Record when each target transaction writing benchi.events commits: a constraint trigger deferred to the
    commit stamps the transaction once (the first row wins, the others find it stamped)."""
    run(tgt, "CREATE TABLE benchi.commit_stamps (xid bigint PRIMARY KEY, committed_at double precision)")
    run(tgt, "CREATE FUNCTION benchi.stamp_commit() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN "
             "INSERT INTO benchi.commit_stamps VALUES (txid_current(), extract(epoch FROM clock_timestamp())) "
             "ON CONFLICT DO NOTHING; RETURN NULL; END$$")
    run(tgt, "CREATE CONSTRAINT TRIGGER stamp_commit AFTER INSERT OR UPDATE ON benchi.events "
             "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION benchi.stamp_commit()")


class DagsterPath:
    """The Dagster path itself: a `dagster-daemon` on its own DAGSTER_HOME (the repository's dagster.yaml) whose
    sensor `<task>_incremental_launcher` launches the bounded runs of `<task>_incremental`, one at a time, as in
    production; Popen-like for steady(): poll() is None while the daemon runs, send_signal() stops it."""

    def __init__(self, d: Direction, config: Path) -> None:
        self.d, self.task = d, load_config(config).task_id
        self.home = d.base / f"dagster_home_{d.name}"
        subprocess.run(["rm", "-rf", str(self.home)], check=True)
        self.home.mkdir(parents=True)
        (self.home / "dagster.yaml").write_text((REPO / "dagster.yaml").read_text())
        env = {**os.environ, "DAGSTER_HOME": str(self.home), "CDC_ASSETS_CONFIG": str(config),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        with open(d.base / f"{d.name}_daemon.log", "wb") as out:
            self.proc = subprocess.Popen(["dagster-daemon", "run", "-w", str(REPO / "workspace.yaml")], cwd=REPO,
                                         env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.returncode = None

    def poll(self):
        return self.proc.poll()

    def send_signal(self, signum) -> None:
        """Stops the daemon once no run is under way: the target has caught up, so the sensor launches no more
        (killing a run mid-way would only be counted as a failed run)."""
        from dagster import DagsterInstance, RunsFilter

        from cdc_assets.defs.incremental import ACTIVE

        deadline = time.monotonic() + 120
        with DagsterInstance.from_config(str(self.home)) as instance:
            while instance.get_run_records(RunsFilter(statuses=ACTIVE), limit=1) and time.monotonic() < deadline:
                time.sleep(0.5)
        stop_groups([self.proc], grace=60)
        self.returncode = 0

    def runs(self) -> tuple[int, int, float]:
        """(runs, failed, median seconds from a run's start to its end)."""
        from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

        with DagsterInstance.from_config(str(self.home)) as instance:
            records = instance.get_run_records(RunsFilter(job_name=f"{self.task}_incremental"))
        took = sorted(r.end_time - r.start_time for r in records if r.start_time and r.end_time)
        failed = sum(r.dagster_run.status == DagsterRunStatus.FAILURE for r in records)
        return len(records), failed, took[len(took) // 2] if took else NAN


def steady(d: Direction, config: Path, rate: int, seconds: float, backlog_ids: int, dagster: bool = False) -> dict:
    tgt = d.postgres.connect("warehouse")
    stamp_commits(tgt)
    proc = DagsterPath(d, config) if dagster else start_cli(d, config, f"{d.name}_follow")
    src = d.connect()
    # A probe row through the whole path first: the writer starts once sync is up and applying.
    run(src, "INSERT INTO benchi.events (id, a, written_at) VALUES (0, 0, %s)", (time.time(),))
    deadline = time.monotonic() + (300 if dagster else 120)
    while not run(tgt, "SELECT 1 FROM benchi.events WHERE id = 0"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"sync did not apply the probe row (exit {proc.returncode}): {d.name}_follow.log")
        time.sleep(0.05)
    out: dict = {}
    begin_at = time.time()
    thread = threading.Thread(target=writer, args=(d, rate, seconds, backlog_ids + 1, max(1, backlog_ids), out))
    thread.start()
    while thread.is_alive():
        thread.join(0.5)
        if proc.poll() is not None:
            print(f"  !!!!! sync exited with {proc.returncode} while the writer ran: {d.name}_follow.log")
            break
    thread.join()
    want, stopped = totals(src), time.monotonic()
    while totals(tgt) != want and time.monotonic() - stopped < 120 + seconds:
        time.sleep(0.1)
    drain = time.monotonic() - stopped
    ok = verify(f"{d.name} steady state", d, "warehouse")
    proc.send_signal(signal.SIGTERM)
    if dagster:
        runs, code, took = proc.runs()
        rss = NAN
        print(f"  {d.name}: the sensor launched {runs} runs of {proc.task}_incremental ({code} failed; median "
              f"{took:.1f} s from a run's start to its end)")
    else:
        code, rss = reap(proc, 60)
    n, pcts, worst = run(tgt, f"SELECT COUNT(*), percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY {LAG}), "
                              f"MAX({LAG}) FROM {STAMPED} WHERE e.written_at >= %s", (begin_at,))[0]
    src.close(), tgt.close()
    (p50, p99), worst = pcts or (NAN, NAN), NAN if worst is None else worst
    # A sync that SIGTERM stopped cleanly exits with the shell's code for it (128 + 15); a Dagster run count is 0.
    clean = 0 if dagster else 128 + signal.SIGTERM
    r = {"rate": out["written"] / out["secs"], "p50": p50, "p99": p99, "max": worst, "ok": ok and code == clean}
    print(f"{d.name} steady state: writer {out['written']:,} changes in {out['secs']:.1f} s = {r['rate']:,.0f}/s; "
          f"lag over {n:,} rows p50 {p50:.3f} s, p99 {p99:.3f} s, max {worst:.3f} s; caught up {drain:.1f} s after "
          f"the writer stopped; "
          + (f"{code} runs failed" if dagster else f"SIGTERM -> exit code {code}; peak RSS of sync {rss:,.0f} MiB"))
    return r


def main() -> int:
    global TARGETS, TX_ROWS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=1_000_000, help="backlog size (half inserts, half updates)")
    parser.add_argument("--dir", default="/tmp/cdc-bench-incr")
    parser.add_argument("--rate", type=int, default=2000, help="steady-state changes per second")
    parser.add_argument("--seconds", type=float, default=60, help="steady-state duration")
    parser.add_argument("--direction", choices=("mysql", "postgres", "both"), default="both")
    parser.add_argument("--big-txn", type=int, nargs="?", const=2_000_000, metavar="N",
                        help="instead: one transaction updating N rows (default 2,000,000)")
    parser.add_argument("--targets", type=int, default=1, help="PostgreSQL targets of the in-process task")
    parser.add_argument("--tx-rows", type=int, default=TX_ROWS, help="changes per backlog transaction")
    parser.add_argument("--dagster", action="store_true",
                        help="steady state through the daemon's sensor-launched bounded runs (the Dagster path)")
    args = parser.parse_args()
    TARGETS, TX_ROWS = args.targets, args.tx_rows
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o755)
    mariadb, postgres = start_servers(base / "servers")
    print(f"{os.cpu_count()} CPUs; cdc_assets in {REPO}; rows of (bigint key, int, varchar(64), decimal(12,2), "
          f"datetime(6), double); pipeline {PIPELINE}")
    results = []
    kinds = ("mysql", "postgres") if args.direction == "both" else (args.direction,)
    if args.big_txn:
        return big_transactions(kinds, args.big_txn, mariadb, postgres, base)
    try:
        for kind in kinds:
            d = Direction(kind, mariadb, postgres, base)
            reset(d)
            c = catch_up(d, args.changes)
            results.append((d.name, c, steady(d, c["config"], args.rate, args.seconds, args.changes // 2,
                                              args.dagster)))
    finally:
        stop_servers(base / "servers")
    print(f"\n{os.cpu_count()} CPUs; backlog {args.changes // 2 * 2:,} changes in transactions of {TX_ROWS:,}; steady {args.rate:,}/s for "
          f"{args.seconds:g} s; RSS: peak of the CLI catch-up process / of this process (in-process catch-up)")
    print(f"{'direction':<12} {'catch-up ev/s':>13} {'raw rows/s':>11} {'ratio':>6} {'CLI e2e s':>9} "
          f"{'lag p50 s':>9} {'lag p99 s':>9} {'lag max s':>9} {'write/s':>8} {'RSS MiB':>10}  checks")
    for name, c, s in results:
        rss = f"{c['cli_rss']:,.0f}/{c['self_rss']:,.0f}"
        print(f"{name:<12} {c['rate']:>13,.0f} {c['raw']:>11,.0f} {c['rate'] / c['raw']:>6.2f} {c['cli_secs']:>9.1f} "
              f"{s['p50']:>9.3f} {s['p99']:>9.3f} {s['max']:>9.3f} {s['rate']:>8,.0f} {rss:>10}  "
              f"{'ok' if c['ok'] and s['ok'] else 'FAILED: see MISMATCH / exit code / counts above'}")
    return 0


def big_transactions(kinds: tuple[str, ...], rows: int, mariadb, postgres, base: Path) -> int:
    results, part = [], PipelineConfig(**PIPELINE)
    try:
        for kind in kinds:
            d = Direction(kind, mariadb, postgres, base)
            reset(d)
            results.append((d.name, big_transaction(d, rows)))
    finally:
        stop_servers(base / "servers")
    print(f"\n{os.cpu_count()} CPUs (shared: noisy); one transaction updating {rows:,} rows; parts of "
          f"{part.transaction_part_events:,} changes; RSS: peak of the CLI sync process (VmHWM)")
    print(f"{'direction':<12} {'seconds':>8} {'events/s':>9} {'peak RSS MiB':>12}  checks")
    for name, r in results:
        print(f"{name:<12} {r['secs']:>8.1f} {r['rate']:>9,.0f} {r['rss']:>12,.0f}  "
              f"{'ok' if r['ok'] else 'FAILED: see MISMATCH / exit code above'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
