"""Snapshot throughput: `cdc-assets snapshot` on 1,000,000 and 3,000,000 rows, MySQL->PostgreSQL and
PostgreSQL->PostgreSQL, beside the practical limit of this machine measured in the same run (server-side export +
COPY).

    python bench/snapshot.py [--rows 1000000,3000000] [--dir /tmp/cdc-bench] [--repeat N] [--no-connect] [--no-pipe]

Prints per row count and direction: end-to-end seconds and rows/s of the CLI (process, Spark and Dagster start-up
included), the same CLI run attached to a long-lived Spark Connect server (`spark.remote`, started once by the
bench, its start-up not counted), the same work in-process with a started Spark session (its start and stop excluded), the limit, both ratios
(limit / ours), and the peak RSS of each case's processes (the largest one, and all of them together: driver,
JVM, Python workers). With `--repeat N`, each case's best of N. Every case starts on settled servers with the
source table read once (`settle`).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import yaml

from cdc_assets.config import load_config
from cdc_assets.dev.servers import start_servers
from cdc_assets.dev.spark_connect import SparkConnectServer
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets.sources.postgres.slot import drop_slot, slot_name
from settle import quiet

SHAPE = "id INT PRIMARY KEY, a INT, b VARCHAR(64), c DECIMAL(12,2), d {ts}, e DOUBLE PRECISION"


def seed(mariadb, postgres, rows: int) -> None:
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS bench")
        cur.execute("USE bench")
        cur.execute(f"CREATE TABLE IF NOT EXISTS rows6 ({SHAPE.format(ts='DATETIME(6)')})")
        cur.execute("SELECT COUNT(*) FROM rows6")
        if cur.fetchone()[0] != rows:
            cur.execute("TRUNCATE rows6")
            cur.execute(f"INSERT INTO rows6 SELECT seq, seq % 1000, CONCAT('forty characters of text for the row ', LPAD(seq, 7, '0')),"
                        f" seq / 100, TIMESTAMP('2024-01-01') + INTERVAL seq SECOND + INTERVAL seq MICROSECOND, seq / 7"
                        f" FROM seq_1_to_{rows}")
            cur.execute("ANALYZE TABLE rows6")
            cur.fetchall()
    conn.close()
    postgres.create_database("benchsrc")
    conn = postgres.connect("benchsrc")
    with conn.cursor() as cur:
        cur.execute("CREATE SCHEMA IF NOT EXISTS bench")
        cur.execute(f"CREATE TABLE IF NOT EXISTS bench.rows6 ({SHAPE.format(ts='TIMESTAMP(6)')})")
        cur.execute("SELECT COUNT(*) FROM bench.rows6")
        if cur.fetchone()[0] != rows:
            cur.execute("TRUNCATE bench.rows6")
            cur.execute(f"INSERT INTO bench.rows6 SELECT g, g % 1000, 'forty characters of text for the row ' || lpad(g::text, 7, '0'),"
                        f" g / 100.0, TIMESTAMP '2024-01-01' + g * INTERVAL '1 second' + g * INTERVAL '1 microsecond', g / 7.0"
                        f" FROM generate_series(1, {rows}) g")
            # Vacuumed here, not by autovacuum in the middle of the first case: a fresh 3M-row table is an insert
            # threshold's worth, and its vacuum would read and write the table while a case runs.
            cur.execute("VACUUM (ANALYZE) bench.rows6")
    conn.close()


def drop_task_slot(postgres, name: str) -> None:
    """The replication slot a PostgreSQL source's plan creates for the log phase, which this bench never runs: kept,
    it holds every WAL segment the cases write (72 GB after two hours of runs filled the disk)."""
    conn = postgres.connect()
    conn.autocommit = True
    try:
        drop_slot(conn, slot_name(name))
    finally:
        conn.close()


def settle(mariadb, postgres, name: str) -> None:
    """Before each timed case: no slot left from the case before, settled servers (bench/settle.py), then the
    direction's source table read once, so that every case finds it as cached as the others (the limit, last, would
    otherwise find it warmest)."""
    drop_task_slot(postgres, name)
    quiet(mariadb, postgres)
    conn, table = (mariadb.connect("bench"), "rows6") if name.startswith("mysql") else (postgres.connect("benchsrc"),
                                                                                      "bench.rows6")
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*), SUM(LENGTH(b)) FROM {table}")
        cur.fetchall()
    conn.close()


def reset_target(postgres) -> None:
    postgres.create_database("warehouse")
    conn = postgres.connect("warehouse")
    with conn.cursor() as cur:
        cur.execute("DROP SCHEMA IF EXISTS bench CASCADE")
        cur.execute("DROP SCHEMA IF EXISTS cdc_bench_limit CASCADE")
    conn.close()


def write_config(base: Path, name: str, source_url: str, target_url: str, remote: str | None = None,
                 pipe: bool = True) -> Path:
    path = base / f"{name}{'_connect' if remote else ''}.yaml"
    path.write_text(yaml.safe_dump({
        "task_id": name,
        "source": {"db_type": source_url.split(":")[0].replace("postgresql", "postgres"), "url": source_url,
                   "tables": ["bench.rows6"]},
        "target": {"db_type": "postgres", "url": target_url},
        "snapshot": {"split_size": 100_000, "partitions_per_run": 16, "pipe": pipe},
        "runtime": {"data_dir": str(base / f"state_{name}")},
        "spark": {"conf": {"spark.remote": remote}} if remote else {"master": "local[*]"},
    }))
    return path


def fresh_state(base: Path, name: str) -> None:
    subprocess.run(["rm", "-rf", str(base / f"state_{name}")], check=True)


class PeakRss:
    """Peak resident memory of a process and its descendants, sampled every 50 ms: the largest process, and the
    sum over the tree (the JVM outlives a waited-for child's accounting, so getrusage cannot tell it)."""

    def __init__(self) -> None:
        self.largest = self.total = 0

    @contextmanager
    def watching(self, pid: int, leave_out: frozenset[int] = frozenset()):
        """`leave_out`: processes whose trees are not the case's (the Connect server the bench started)."""
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.05):
                sizes = [_rss(p) for p in _tree(pid, leave_out)]
                self.largest, self.total = max(self.largest, *sizes, 0), max(self.total, sum(sizes))
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            yield self
        finally:
            stop.set()
            sampler.join()

    def text(self) -> str:
        return f"largest process {self.largest / 2**20:,.0f} MiB, all {self.total / 2**20:,.0f} MiB"


def _tree(root: int, leave_out: frozenset[int] = frozenset()) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if _name(pid) in SERVERS or pid in leave_out:  # the bench's own servers are not the snapshot's memory
            continue
        out.append(pid)
        todo += children.get(pid, [])
    return out


SERVERS = {"mariadbd", "mysqld", "postgres"}


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def cli_run(config: Path, env: dict, peak: PeakRss) -> float:
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "cdc_assets.cli", "--config", str(config), "snapshot"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with peak.watching(proc.pid):
        if proc.wait() != 0:
            raise SystemExit(f"cdc-assets snapshot failed ({proc.returncode}); see the task's spark.log and errors.log")
    return time.monotonic() - started


def fresh_case(mariadb, postgres, base: Path, name: str) -> None:
    """An empty target, settled servers and no task state: where every timed case starts."""
    reset_target(postgres)
    settle(mariadb, postgres, name)
    fresh_state(base, name)


def _fresh_cli_run(mariadb, postgres, base: Path, name: str, config: Path, env: dict, peak: PeakRss) -> float:
    fresh_case(mariadb, postgres, base, name)
    return cli_run(config, env, peak)


def in_process_run(config: Path) -> tuple[float, float, float]:
    """(start-up seconds, snapshot seconds, stop seconds): plan + every split, with the session already started;
    stopping the session (0.4-0.6 s on 2 cores) is no part of the snapshot either."""
    runtime = TaskRuntime(load_config(config))
    started = time.monotonic()
    runtime.spark  # session and warm-up
    ready = time.monotonic()
    try:
        [tp] = ensure_plans(runtime)
        results = snapshot_splits(runtime, tp.plan.table, [s.id for s in tp.plan.splits])
        done = time.monotonic()
    finally:
        runtime.close()
    assert sum(r.rows for r in results) > 0
    return ready - started, done - ready, time.monotonic() - done


def limit_mysql_to_pg(mariadb, postgres, base: Path) -> float:
    """SELECT ... INTO OUTFILE on the server, then COPY of that file into an indexed PostgreSQL table."""
    out = base / "limit.tsv"
    out.unlink(missing_ok=True)
    started = time.monotonic()
    conn = mariadb.connect("bench")
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, a, b, c, d, e FROM rows6 INTO OUTFILE '{out}'")
    conn.close()
    return time.monotonic() - started + copy_in(postgres, out)


def limit_pg_to_pg(postgres, base: Path) -> float:
    out = base / "limit.tsv"
    started = time.monotonic()
    conn = postgres.connect("benchsrc")
    with conn.cursor() as cur, open(out, "w") as f:
        cur.copy_expert("COPY bench.rows6 TO STDOUT", f)
    conn.close()
    return time.monotonic() - started + copy_in(postgres, out)


def copy_in(postgres, path: Path) -> float:
    conn = postgres.connect("warehouse")
    with conn.cursor() as cur:
        cur.execute("DROP SCHEMA IF EXISTS cdc_bench_limit CASCADE; CREATE SCHEMA cdc_bench_limit")
        cur.execute(f"CREATE TABLE cdc_bench_limit.rows6 ({SHAPE.format(ts='TIMESTAMP(6)')})")
        started = time.monotonic()
        with open(path) as f:
            cur.copy_expert("COPY cdc_bench_limit.rows6 FROM STDIN", f)
        took = time.monotonic() - started
        cur.execute("DROP SCHEMA cdc_bench_limit CASCADE")
    conn.close()
    return took


WARM_UP_CONNECT = """import sys
from cdc_assets.spark.session import attach_session
session, _ = attach_session({"spark.remote": sys.argv[1]})
session.range(4).collect()
frame = session.createDataFrame([(1,)], "w int")
frame.mapInArrow(lambda batches: batches, frame.schema).collect()
session.stop()"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="1000000,3000000", help="row counts, comma-separated")
    parser.add_argument("--dir", default="/tmp/cdc-bench")
    parser.add_argument("--repeat", type=int, default=1, help="best of N for every case: each CLI run, the in-process run and the limit")
    parser.add_argument("--no-connect", action="store_true",
                        help="skip the end-to-end run attached to a Spark Connect server (spark.remote)")
    parser.add_argument("--no-pipe", action="store_true",
                        help="snapshot.pipe: false, every split read through Spark JDBC (the path before the pipes)")
    args = parser.parse_args()
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o755)
    mariadb, postgres = start_servers(base / "servers")
    env = {**os.environ, "DAGSTER_HOME": str(base / "dagster_home")}
    connect = None
    if not args.no_connect:  # the long-lived Spark a CLI run attaches to: started once, its start-up not counted
        began = time.monotonic()
        connect = SparkConnectServer(base / "connect").start()
        # A long-lived server has long since loaded and compiled its classes: one JVM job and one Python job
        # first, in a process of their own (this one starts local sessions).
        subprocess.run([sys.executable, "-c", WARM_UP_CONNECT, connect.url], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"Spark Connect server {connect.url} started and warmed up in {time.monotonic() - began:.1f} s "
              "(not counted)")
    directions = [
        ("mysql_to_pg", mariadb.url(), lambda: limit_mysql_to_pg(mariadb, postgres, base)),
        ("pg_to_pg", postgres.url("benchsrc"), lambda: limit_pg_to_pg(postgres, base)),
    ]
    print(f"rows of (int key, int, varchar(64), decimal(12,2), datetime(6), double); {os.cpu_count()} cores; "
          f"Spark local[*]; snapshot.pipe {not args.no_pipe}; ratios are limit / ours")
    for rows in [int(r.replace("_", "")) for r in args.rows.split(",")]:
        seed(mariadb, postgres, rows)
        for name, source_url, limit in directions:
            config = write_config(base, name, source_url, postgres.url("warehouse"), pipe=not args.no_pipe)
            cli_peak, core_peak = PeakRss(), PeakRss()
            e2e = min(_fresh_cli_run(mariadb, postgres, base, name, config, env, cli_peak)
                      for _ in range(args.repeat))
            took = None
            if connect is not None:
                remote = write_config(base, name, source_url, postgres.url("warehouse"), connect.url,
                                      not args.no_pipe)
                took = min(_fresh_cli_run(mariadb, postgres, base, name, remote, env, PeakRss())
                           for _ in range(args.repeat))
            runs = []
            with core_peak.watching(os.getpid(), frozenset({connect.pid} if connect is not None else ())):
                for _ in range(args.repeat):
                    fresh_case(mariadb, postgres, base, name)
                    runs.append(in_process_run(config))
            startup, core, stop = min(runs, key=lambda r: r[1])
            limits = []
            for _ in range(args.repeat):
                fresh_case(mariadb, postgres, base, name)
                limits.append(limit())
            lim = min(limits)
            attached = "" if took is None else f"end-to-end attached to Spark Connect {took:.1f} s, ratio {lim / took:.2f} | "
            print(f"{rows:,} rows {name}: end-to-end {e2e:.1f} s = {rows / e2e:,.0f} rows/s, ratio {lim / e2e:.2f} | "
                  f"{attached}"
                  f"Spark's start and stop excluded {core:.1f} s = {rows / core:,.0f} rows/s, ratio {lim / core:.2f} "
                  f"(start-up {startup:.1f} s, stop {stop:.1f} s) | limit (export + COPY) {lim:.1f} s = {rows / lim:,.0f} rows/s | "
                  f"peak RSS end-to-end: {cli_peak.text()}; in process: {core_peak.text()}", flush=True)
    if connect is not None:
        connect.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
