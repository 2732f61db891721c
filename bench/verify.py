"""Verification beside an application's writes, the corruptions it finds, and their repair.

    python bench/verify.py [--direction mysql|postgres|both] [--tables 4] [--rows 20000] [--rate 100]
                           [--keyed-rows 10000] [--seconds 60] [--base-runs 3] [--rounds 20] [--hold-rounds 2]
                           [--max-minutes 8] [--corruptions 50] [--paced 10000] [--split-cpus]
                           [--dir /tmp/cdc-bench-verify]

Per direction (MariaDB -> PostgreSQL, PostgreSQL -> PostgreSQL), on private servers: sysbench prepares --tables
tables of --rows rows on the source (int keys), beside them three tables keyed otherwise (text, composite, and on
MariaDB case-insensitive text) of --keyed-rows rows each, which a second writer updates all along; `cdc-assets
snapshot` copies them, and a `cdc-assets sync` process applies the log from then on. Then, in one run, while
sysbench `oltp_write_only` writes at --rate transactions/s: no verification (--seconds); one verifier process
verifying every split of every table again and again, as the always-on schedule does, lock-free, until --rounds
full rounds are done; the same paced at --paced rows a second (`verify.rows_per_second`); the same with `hold`
(--hold-rounds). Per phase: the application's transactions, its errors (sysbench's ignored errors on MySQL:
deadlocks, lock wait timeouts; failed threads on PostgreSQL), the server's deadlock count, the application's
latency avg/p99 (sysbench's own figures), the full rounds and every split verdict (a FAILED one there is a false
alarm: nothing was corrupted yet). Last, --corruptions target rows are corrupted at random in every table (a
changed value, a deleted row, an extra row) with the writers stopped, one lock-free verification must name each
in the FAILED line of the split that holds its key, and then the failed splits are repaired (materialized again,
lock-free) while sysbench writes again, and verified once more.

--split-cpus models a source database on a host of its own: the source server and sysbench run on CPU 0, and
everything of the task (the sync, the verifier and its Spark, the target server, a PostgreSQL of its own when the
source is PostgreSQL) on CPU 1. The verification's cost to the application is then what the source server does
for it (its reads and the log of each window), not CPU the verifier's own process takes from the application on
a shared machine. Without it every process shares every CPU.
Prints figures, never asserts.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

import cdc_assets
from cdc_assets.config import load_config
from cdc_assets.core.keys import range_predicate
from cdc_assets.dev.postgres import PostgresServer
from cdc_assets.dev.processes import free_port
from cdc_assets.dev.servers import start_servers, stop_servers
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets.engine.verify import FAILED, INCONCLUSIVE, PASSED, verify_table
from cdc_assets.sources.postgres.slot import drop_slot, publication_name, slot_name

REPO = Path(cdc_assets.__file__).resolve().parents[1]
SOURCE_DB, TARGET_DB = "sbverify", "sbverify_target"
SOURCE_CPU, TASK_CPU = {0}, {1}  # with --split-cpus


def phases(paced: int) -> list[tuple[str, bool | None, int]]:
    """(name, hold, rows/s) of each phase: hold None is the run without verification."""
    return [("no verification", None, 0), ("lock-free verify", False, 0),
            *([(f"lock-free, {paced:,} rows/s", False, paced)] if paced else []), ("verify --hold", True, 0)]


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` and of its children on `cpus`; what they start later inherits it."""
    family = [pid] + [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == pid]
    for member in family:
        try:
            for tid in os.listdir(f"/proc/{member}/task"):
                os.sched_setaffinity(int(tid), cpus)
        except (FileNotFoundError, ProcessLookupError):
            continue  # ended meanwhile


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0
# Tables keyed otherwise than sysbench's int: (name, DDL, how a row's key is written, key columns).
KEYED = {
    "mysql": [("kv_text", "CREATE TABLE kv_text (k VARCHAR(40) COLLATE utf8mb4_bin PRIMARY KEY, c VARCHAR(120))"),
              ("kv_comp", "CREATE TABLE kv_comp (a INT, b VARCHAR(20), c VARCHAR(120), PRIMARY KEY (a, b))"),
              ("kv_ci", "CREATE TABLE kv_ci (k VARCHAR(40) COLLATE utf8mb4_general_ci PRIMARY KEY, c VARCHAR(120))")],
    "postgres": [("kv_text", "CREATE TABLE kv_text (k TEXT PRIMARY KEY, c TEXT)"),
                 ("kv_comp", "CREATE TABLE kv_comp (a INT, b TEXT, c TEXT, PRIMARY KEY (a, b))")],
}


class Direction:
    def __init__(self, kind: str, mariadb, postgres, base: Path, tables: int, keyed_rows: int,
                 target: PostgresServer | None = None, split_cpus: bool = False) -> None:
        self.keyed_rows, self.split_cpus = keyed_rows, split_cpus
        self.kind, self.mariadb, self.postgres, self.base = kind, mariadb, postgres, base
        self.server = mariadb if kind == "mysql" else postgres
        self.target = target or postgres  # the PostgreSQL server of the target database
        self.task = f"verify_bench_{kind}"
        self.namespace = SOURCE_DB if kind == "mysql" else "public"
        self.keyed = [name for name, _ in KEYED[kind]]
        self.tables = [f"{self.namespace}.sbtest{i}" for i in range(1, tables + 1)] + \
            [f"{self.namespace}.{name}" for name in self.keyed]

    def keys(self, table: str) -> list[tuple]:
        """The seeded keys of a keyed table, as its key columns take them."""
        if table == "kv_comp":
            return [(i // 3, f"b-{i % 3}") for i in range(self.keyed_rows)]
        # Mixed case in the case-insensitive table: its order differs from the byte order of the target.
        return [(f"{'Key' if table == 'kv_ci' and i % 2 else 'key'}-{i:06d}",) for i in range(self.keyed_rows)]

    def key_where(self, table: str) -> str:
        cols = ("a", "b") if table == "kv_comp" else ("k",)
        return " AND ".join(f"{c} = %s" for c in cols)

    def sysbench(self, command: str, args: argparse.Namespace, *more: str) -> list[str]:
        if self.kind == "mysql":
            driver = ["--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={self.mariadb.port}",
                      f"--mysql-user={self.mariadb.user}", f"--mysql-password={self.mariadb.password}",
                      f"--mysql-db={SOURCE_DB}", "--mysql-ignore-errors=all"]
        else:
            driver = ["--db-driver=pgsql", "--pgsql-host=127.0.0.1", f"--pgsql-port={self.postgres.port}",
                      "--pgsql-user=postgres", f"--pgsql-db={SOURCE_DB}"]
        return [*(["taskset", "-c", "0"] if self.split_cpus else []), "sysbench", "oltp_write_only", *driver, f"--tables={len(self.tables)}",
                f"--table-size={args.rows}", *more, command]

    def deadlocks(self) -> int:
        conn = self.server.connect(SOURCE_DB)
        try:
            with conn.cursor() as cur:
                if self.kind == "mysql":
                    cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")
                else:
                    cur.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = %s", (SOURCE_DB,))
                row = cur.fetchone()
                return int(row[-1]) if row else 0
        finally:
            conn.close()

    def config(self, rows: int, rows_per_second: int = 0) -> Path:
        path = self.base / f"{self.task}_{rows_per_second}.yaml"
        path.write_text(yaml.safe_dump({
            "task_id": self.task,
            "source": {"db_type": self.kind, "url": self.server.url(SOURCE_DB), "tables": self.tables},
            "target": {"db_type": "postgres", "url": self.target.url(TARGET_DB)},
            "snapshot": {"split_size": max(1, rows // 4)},
            "pipeline": {"checkpoint_interval_secs": 0.3},
            "runtime": {"data_dir": str(self.base / f"state_{self.task}")},
            "spark": {"master": "local[*]"},
            "verify": {"rows_per_second": rows_per_second},
        }))
        return path


def cli(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "cdc_assets.cli", "--config", str(config), *args]


def reset(d: Direction, args) -> None:
    """Fresh source tables, an empty target and no task state of an earlier run."""
    d.server.create_database(SOURCE_DB)
    if d.kind == "postgres":
        conn = d.postgres.connect(SOURCE_DB)
        try:
            drop_slot(conn, slot_name(d.task))
            with conn.cursor() as cur:
                cur.execute(f"DROP PUBLICATION IF EXISTS {publication_name(d.task)}")
        finally:
            conn.close()
    subprocess.run(d.sysbench("cleanup", args), capture_output=True)
    subprocess.run(d.sysbench("prepare", args), check=True, capture_output=True)
    conn = d.server.connect(SOURCE_DB)
    with conn.cursor() as cur:
        for name, ddl in KEYED[d.kind]:
            cur.execute(f"DROP TABLE IF EXISTS {name}")
            cur.execute(ddl)
            keys = d.keys(name)
            for i in range(0, len(keys), 1000):
                chunk = keys[i:i + 1000]
                marks = ", ".join("(" + ", ".join(["%s"] * (len(k) + 1)) + ")" for k in chunk)
                cur.execute(f"INSERT INTO {name} VALUES {marks}", [v for k in chunk for v in (*k, f"row {k}")])
        if d.kind == "mysql":
            cur.execute("COMMIT")
    conn.close()
    d.target.create_database(TARGET_DB)
    conn = d.target.connect(TARGET_DB)
    with conn.cursor() as cur:
        cur.execute(f"DROP SCHEMA IF EXISTS {SOURCE_DB} CASCADE")
        for table in d.tables:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
    conn.close()
    subprocess.run(["rm", "-rf", str(d.base / f"state_{d.task}")], check=True)


class Verifier(threading.Thread):
    """One process verifying every split of every table again and again until stopped, as the always-on schedule
    does: full rounds completed and every split verdict."""

    def __init__(self, config: Path, hold: bool) -> None:
        super().__init__(daemon=True)
        self.rt, self.hold = TaskRuntime(load_config(config)), hold
        self.halt = threading.Event()
        self.rounds = 0
        self.verdicts = {PASSED: 0, FAILED: 0, INCONCLUSIVE: 0}
        self.failed_lines: list[str] = []

    def one_round(self) -> bool:
        for table in self.rt.config.source.table_ids:
            if self.halt.is_set():
                return False
            for check in verify_table(self.rt, table, wait_secs=60, hold=self.hold):
                self.verdicts[check.status] += 1
                if check.status == FAILED:
                    self.failed_lines.append(f"{check.split_id}: {check.line()}")
        return True

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                self.rounds += self.one_round()
        finally:
            self.rt.close()


class Writer(threading.Thread):
    """Small updates of the keyed tables, about --rate/5 a second, until stopped."""

    def __init__(self, d: "Direction", rate: int) -> None:
        super().__init__(daemon=True)
        self.d, self.pause = d, 5.0 / max(rate, 1)
        self.halt = threading.Event()
        self.commits = 0

    def run(self) -> None:
        rng = random.Random(11)
        conn = self.d.server.connect(SOURCE_DB)
        try:
            with conn.cursor() as cur:
                while not self.halt.is_set():
                    table = rng.choice(self.d.keyed)
                    key = rng.choice(self.d.keys(table))
                    cur.execute(f"UPDATE {table} SET c = %s WHERE {self.d.key_where(table)}",
                                (f"w{self.commits}", *key))
                    if self.d.kind == "mysql":
                        cur.execute("COMMIT")
                    self.commits += 1
                    time.sleep(self.pause)
        finally:
            conn.close()


def sysbench_figures(out: str) -> dict:
    def number(pattern: str) -> float:
        m = re.search(pattern, out)
        return float(m.group(1)) if m else float("nan")

    return {"transactions": number(r"transactions:\s+(\d+)"), "ignored errors": number(r"ignored errors:\s+(\d+)"),
            "p99 ms": number(r"99th percentile:\s+([\d.]+)"), "avg ms": number(r"avg:\s+([\d.]+)"),
            "fatal": out.count("FATAL")}


def phase(d: Direction, args, config: Path, hold: bool | None, rounds: int = 0) -> dict:
    """sysbench runs of --seconds each, one after the other: --base-runs of them without verification; verifying,
    until the verifier completed `rounds` full rounds (at most --max-minutes). The p99 is the median of the runs'."""
    deadlocks = d.deadlocks()
    verifier = Verifier(config, hold) if hold is not None else None
    writer = Writer(d, args.rate)
    writer.start()
    if verifier is not None:
        verifier.start()
    runs: list[dict] = []
    started = time.monotonic()
    while True:
        bench = subprocess.run(d.sysbench("run", args, f"--rate={args.rate}", f"--time={args.seconds}",
                                          "--threads=4", "--percentile=99", "--histogram=off"),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        runs.append(sysbench_figures(bench.stdout))
        if verifier is None and len(runs) >= args.base_runs:
            break
        if verifier is not None and (verifier.rounds >= rounds or not verifier.is_alive()):
            break
        if time.monotonic() - started > args.max_minutes * 60:
            break
    writer.halt.set()
    if verifier is not None:
        verifier.halt.set()
        verifier.join(600)
    writer.join(60)
    p99s = sorted(r["p99 ms"] for r in runs)
    figures = {"transactions": sum(r["transactions"] for r in runs),
               "ignored errors": sum(r["ignored errors"] for r in runs), "fatal": sum(r["fatal"] for r in runs),
               "avg ms": sum(r["avg ms"] for r in runs) / len(runs), "p99 ms": p99s[len(p99s) // 2],
               "p99 max": p99s[-1], "seconds": len(runs) * args.seconds, "runs": len(runs),
               "deadlocks": d.deadlocks() - deadlocks, "keyed updates": writer.commits}
    if verifier is not None:
        figures.update(rounds=verifier.rounds, **{k.lower(): v for k, v in verifier.verdicts.items()})
        figures["false alarms"] = verifier.failed_lines[:3]
    return figures


def corrupt(d: Direction, config: Path, count: int, rows: int) -> tuple[int, int, list[str], set[tuple]]:
    """Corrupt `count` target rows across every table; run one verification; how many were named in the FAILED
    line of the split holding them (the source says which split that is), and the failed splits."""
    rng = random.Random(7)
    rt = TaskRuntime(load_config(config))
    plans = {t: rt.plans.load(t) for t in rt.config.source.table_ids}
    target = d.target.connect(TARGET_DB)
    chosen: list[tuple] = []  # (table, key text as a report names it, how, the split holding it)
    taken: set[tuple] = set()
    try:
        with target.cursor() as cur:
            while len(chosen) < count:
                table = rng.choice(list(plans))
                how = rng.choice(["changed", "missing", "extra"])
                name = f'"{table.namespace}"."{table.name}"'
                if table.name.startswith("sbtest"):
                    anchor = (rng.randint(1, rows),)
                    key = (rows + 1 + len(chosen),) if how == "extra" else anchor
                    column, where = "c", "id = %s"
                else:
                    anchor = rng.choice(d.keys(table.name))
                    # An extra key sorts right after an existing one: in the same split by any collation.
                    key = (*anchor[:-1], anchor[-1] + "~x") if how == "extra" else anchor
                    column, where = "c", d.key_where(table.name)
                if (table, key) in taken:
                    continue
                if how == "changed":
                    cur.execute(f"UPDATE {name} SET {column} = 'corrupted' WHERE {where}", key)
                elif how == "missing":
                    cur.execute(f"DELETE FROM {name} WHERE {where}", key)
                elif table.name.startswith("sbtest"):
                    cur.execute(f"INSERT INTO {name} (id, k, c, pad) VALUES (%s, 1, 'extra', 'extra')", key)
                else:
                    cur.execute(f"INSERT INTO {name} VALUES ({', '.join(['%s'] * (len(key) + 1))})", (*key, "extra"))
                if cur.rowcount == 1:
                    taken.add((table, key))
                    # A row the source lacks is held by the split whose range holds it in the target's order.
                    split = (holding(d.target.connect(TARGET_DB), "postgres", plans[table], table, key)
                             if how == "extra" else holding(d.server.connect(SOURCE_DB), d.kind, plans[table], table,
                                                            key))
                    chosen.append((table, ", ".join(str(v) if isinstance(v, int) else f'"{v}"' for v in key), how,
                                   split))
    finally:
        target.close()
        rt.close()
    verifier = Verifier(config, hold=False)
    verifier.one_round()
    verifier.rt.close()
    failed = {line.split(": ")[0]: line for line in verifier.failed_lines}
    found, missed = 0, []
    for table, key, how, split in chosen:
        if re.search(rf"[(; ]{re.escape(key)}[;)]", failed.get(split, "")):
            found += 1
        else:
            missed.append(f"{table} {key} ({how}) in {split}")
    return found, len(chosen), missed, {(t, s) for t, _, _, s in chosen}


def holding(conn, dialect: str, plan, table, key: tuple) -> str:
    """The split of `plan` whose range holds `key` in the order of the database `conn` reaches (its collation)."""
    name = f'"{table.namespace}"."{table.name}"' if dialect == "postgres" else table.name
    if table.name.startswith("sbtest"):
        where, first = "id = %s", "id"
    else:
        where = " AND ".join(f"{c} = %s" for c in (("a", "b") if table.name == "kv_comp" else ("k",)))
        first = "a" if table.name == "kv_comp" else "k"
    try:
        with conn.cursor() as cur:
            for split in plan.splits:
                inside = range_predicate(first, split.range, plan.key_kind, dialect)
                cur.execute(f"SELECT 1 FROM {name} WHERE {where} AND {inside}", key)
                if cur.fetchone():
                    return split.id
    finally:
        conn.close()
    return "?"


def repair(d: Direction, args, config: Path, failed: set[tuple]) -> None:
    """Materialize the failed splits again (lock-free) while sysbench writes, then verify them once more."""
    rt = TaskRuntime(load_config(config))
    rt.spark  # noqa: B018 - started before the writes: the repair's figures are not Spark's start
    deadlocks = d.deadlocks()
    bench = subprocess.Popen(d.sysbench("run", args, f"--rate={args.rate}", f"--time={args.seconds}",
                                        "--threads=4", "--percentile=99", "--histogram=off"),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(2)
    started = time.monotonic()
    kept = repaired = 0
    try:
        for table in sorted({t for t, _ in failed}, key=str):
            for result in snapshot_splits(rt, table, sorted(s for t, s in failed if t == table)):
                repaired += result.kept is not None
                kept += result.kept or 0
    finally:
        took = time.monotonic() - started
        rt.close()
    f = sysbench_figures(bench.communicate()[0])
    verifier = Verifier(config, hold=False)
    verifier.one_round()
    verifier.rt.close()
    print(f"  repair: {repaired} of {len(failed)} failed splits read again in {took:.1f} s under sysbench at "
          f"{args.rate} tx/s ({kept} rows the log changed meanwhile left to the sync): app errors "
          f"{f['ignored errors']:.0f} (fatal {f['fatal']}), deadlocks {d.deadlocks() - deadlocks}, latency p99 "
          f"{f['p99 ms']:.2f} ms over the {args.seconds} s run; then every split: "
          f"{verifier.verdicts[PASSED]} passed, {verifier.verdicts[FAILED]} FAILED, "
          f"{verifier.verdicts[INCONCLUSIVE]} inconclusive")
    for line in verifier.failed_lines[:3]:
        print(f"    still failing: {line[:300]}")


def bench(kind: str, args, mariadb, postgres, own_target: PostgresServer | None) -> None:
    d = Direction(kind, mariadb, postgres, Path(args.dir), args.tables, args.keyed_rows,
                  own_target if kind == "postgres" else None, args.split_cpus)
    if args.split_cpus:
        pin(d.server.pid, SOURCE_CPU)
        pin(d.target.pid, TASK_CPU)
    reset(d, args)
    config = d.config(args.rows)
    subprocess.run(cli(config, "snapshot"), check=True, capture_output=True, cwd=REPO)
    syncer = subprocess.Popen(cli(config, "sync"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    try:
        time.sleep(10)  # the sync's first checkpoint
        print(f"\n{kind} -> postgres: {args.tables} tables x {args.rows:,} rows (int keys) and {', '.join(d.keyed)} "
              f"x {args.keyed_rows:,} rows, sysbench oltp_write_only at {args.rate} tx/s (4 threads)"
              + ("; source server and sysbench on CPU 0, the task and the target on CPU 1" if args.split_cpus else ""))
        results = {}
        for name, hold, pace in phases(args.paced):
            rounds = args.hold_rounds if hold else args.rounds
            results[name] = phase(d, args, d.config(args.rows, pace) if pace else config, hold, rounds)
            f = results[name]
            verify = (f", {f['rounds']} full rounds; split verdicts: {f['passed']} passed, {f['failed']} FAILED, "
                      f"{f['inconclusive']} inconclusive" if hold is not None else "")
            print(f"  {name:18} {f['runs']} x {args.seconds} s: transactions {f['transactions']:.0f}, app errors "
                  f"{f['ignored errors']:.0f} (fatal {f['fatal']}), deadlocks {f['deadlocks']}, latency avg "
                  f"{f['avg ms']:.2f} ms, p99 {f['p99 ms']:.2f} ms (max {f['p99 max']:.2f}){verify}", flush=True)
            for line in f.get("false alarms", []):
                print(f"    false alarm: {line[:300]}")
        base = results["no verification"]["p99 ms"]
        for name, _, _ in phases(args.paced)[1:]:
            print(f"  p99 with {name}: {results[name]['p99 ms'] / base:.2f}x the run without verification")
        found, total, missed, failed = corrupt(d, config, args.corruptions, args.rows)
        print(f"  corruptions: {found}/{total} found in the split holding them" +
              (f"; missed: {', '.join(missed[:5])}" if missed else ""), flush=True)
        repair(d, args, config, failed)
    finally:
        syncer.terminate()
        syncer.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--direction", choices=("mysql", "postgres", "both"), default="both")
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--keyed-rows", type=int, default=10_000, help="rows of each table keyed otherwise")
    parser.add_argument("--rate", type=int, default=100, help="sysbench transactions per second")
    parser.add_argument("--seconds", type=int, default=60, help="length of one sysbench run")
    parser.add_argument("--base-runs", type=int, default=3, help="sysbench runs without verification")
    parser.add_argument("--max-minutes", type=float, default=8, help="at most this long a verifying phase")
    parser.add_argument("--rounds", type=int, default=20, help="full lock-free rounds per verifying phase")
    parser.add_argument("--hold-rounds", type=int, default=2, help="full rounds of the phase with the hold")
    parser.add_argument("--corruptions", type=int, default=50)
    parser.add_argument("--paced", type=int, default=10_000,
                        help="rows/s of the paced phase (verify.rows_per_second); 0: no paced phase")
    parser.add_argument("--split-cpus", action="store_true",
                        help="source server and sysbench on CPU 0, the task and its target on CPU 1")
    parser.add_argument("--dir", default="/tmp/cdc-bench-verify")
    args = parser.parse_args()
    if args.split_cpus and len(os.sched_getaffinity(0)) < 2:
        parser.error("--split-cpus needs 2 CPUs")
    mariadb, postgres = start_servers(Path(args.dir) / "servers")
    own_target = None
    try:
        if args.split_cpus:
            os.sched_setaffinity(0, TASK_CPU)  # this process, its threads and children from here on: the task's
            if args.direction != "mysql":  # a PostgreSQL source gets a server of its own, apart from the target
                own_target = PostgresServer(Path(args.dir) / "servers" / "pg_target", free_port()).start()
        for kind in ("mysql", "postgres") if args.direction == "both" else (args.direction,):
            bench(kind, args, mariadb, postgres, own_target)
    finally:
        if own_target is not None:
            own_target.stop()
        stop_servers(Path(args.dir) / "servers")


if __name__ == "__main__":
    main()
