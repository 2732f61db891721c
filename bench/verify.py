"""Verification beside an application's writes, and the corruptions it finds.

    python bench/verify.py [--direction mysql|postgres|both] [--tables 4] [--rows 20000] [--rate 100]
                           [--seconds 60] [--corruptions 50] [--dir /tmp/cdc-bench-verify]

Per direction (MariaDB -> PostgreSQL, PostgreSQL -> PostgreSQL), on private servers: sysbench prepares --tables
tables of --rows rows on the source, `cdc-assets snapshot` copies them, and a `cdc-assets sync` process applies the
log from then on. Then four phases of --seconds each, in one run, while sysbench `oltp_write_only` writes at
--rate transactions/s: no verification; `cdc-assets verify` (lock-free rounds) again and again; the same paced at
PACED rows a second (`verify.rows_per_second`); `cdc-assets verify --hold` again and again. Per phase: the
application's transactions, its errors (sysbench's ignored errors on MySQL: deadlocks, lock wait timeouts; failed
threads on PostgreSQL), the server's deadlock count, the application's latency avg/p99 (sysbench's own figures),
the full verification rounds completed and every split verdict (a FAILED one there is a false alarm: nothing was
corrupted yet). Last, --corruptions rows of the target are corrupted at random (a changed value, a deleted row, an
extra row) with the writer stopped, one lock-free `cdc-assets verify` runs, and each corruption must be named in
the FAILED line of the split that holds its key.
Prints figures, never asserts.
"""
from __future__ import annotations

import argparse
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
from cdc_assets.core.watermarks import in_range
from cdc_assets.dev.servers import start_servers
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.sources.postgres.slot import drop_slot, publication_name, slot_name

REPO = Path(cdc_assets.__file__).resolve().parents[1]
SOURCE_DB, TARGET_DB = "sbverify", "sbverify_target"
PACED = 5_000  # rows/s of the paced phase (verify.rows_per_second)
PHASES = (("no verification", None, 0), ("lock-free verify", [], 0), (f"lock-free, {PACED:,} rows/s", [], PACED),
          ("verify --hold", ["--hold"], 0))


class Direction:
    def __init__(self, kind: str, mariadb, postgres, base: Path, tables: int) -> None:
        self.kind, self.mariadb, self.postgres, self.base = kind, mariadb, postgres, base
        self.server = mariadb if kind == "mysql" else postgres
        self.task = f"verify_bench_{kind}"
        self.namespace = SOURCE_DB if kind == "mysql" else "public"
        self.tables = [f"{self.namespace}.sbtest{i}" for i in range(1, tables + 1)]

    def sysbench(self, command: str, args: argparse.Namespace, *more: str) -> list[str]:
        if self.kind == "mysql":
            driver = ["--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={self.mariadb.port}",
                      f"--mysql-user={self.mariadb.user}", f"--mysql-password={self.mariadb.password}",
                      f"--mysql-db={SOURCE_DB}", "--mysql-ignore-errors=all"]
        else:
            driver = ["--db-driver=pgsql", "--pgsql-host=127.0.0.1", f"--pgsql-port={self.postgres.port}",
                      "--pgsql-user=postgres", f"--pgsql-db={SOURCE_DB}"]
        return ["sysbench", "oltp_write_only", *driver, f"--tables={len(self.tables)}",
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
            "target": {"db_type": "postgres", "url": self.postgres.url(TARGET_DB)},
            "snapshot": {"split_size": max(1, rows // 5)},
            "pipeline": {"checkpoint_interval_secs": 1.0},
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
    d.postgres.create_database(TARGET_DB)
    conn = d.postgres.connect(TARGET_DB)
    with conn.cursor() as cur:
        cur.execute(f"DROP SCHEMA IF EXISTS {SOURCE_DB} CASCADE")
        for table in d.tables:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
    conn.close()
    subprocess.run(["rm", "-rf", str(d.base / f"state_{d.task}")], check=True)


class Verifier(threading.Thread):
    """`cdc-assets verify [extra]` again and again until stopped: full rounds completed and every split verdict."""

    def __init__(self, config: Path, extra: list[str]) -> None:
        super().__init__(daemon=True)
        self.config, self.extra = config, extra
        self.halt = threading.Event()
        self.rounds = 0
        self.verdicts = {"PASSED": 0, "FAILED": 0, "INCONCLUSIVE": 0}
        self.failed_lines: list[str] = []

    def run(self) -> None:
        while not self.halt.is_set():
            out = subprocess.run(cli(self.config, "verify", "--wait", "60", *self.extra), capture_output=True,
                                 text=True, cwd=REPO).stdout
            self.rounds += 0 if self.halt.is_set() else 1  # the round the phase's end cut short: splits only
            for line in out.splitlines():
                for verdict in self.verdicts:
                    if f": {verdict}" in line:
                        self.verdicts[verdict] += 1
                        if verdict == "FAILED":
                            self.failed_lines.append(line)


def sysbench_figures(out: str) -> dict:
    def number(pattern: str) -> float:
        m = re.search(pattern, out)
        return float(m.group(1)) if m else float("nan")

    return {"transactions": number(r"transactions:\s+(\d+)"), "ignored errors": number(r"ignored errors:\s+(\d+)"),
            "p99 ms": number(r"99th percentile:\s+([\d.]+)"), "avg ms": number(r"avg:\s+([\d.]+)"),
            "fatal": out.count("FATAL")}


def phase(d: Direction, args, config: Path, extra: list[str] | None) -> dict:
    deadlocks = d.deadlocks()
    verifier = Verifier(config, extra) if extra is not None else None
    bench = subprocess.Popen(d.sysbench("run", args, f"--rate={args.rate}", f"--time={args.seconds}",
                                        "--threads=4", "--percentile=99", "--histogram=off"),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if verifier is not None:
        verifier.start()
    out = bench.communicate()[0]
    if verifier is not None:
        verifier.halt.set()
        verifier.join(600)
    figures = sysbench_figures(out)
    figures["deadlocks"] = d.deadlocks() - deadlocks
    if verifier is not None:
        figures.update(rounds=verifier.rounds, **{k.lower(): v for k, v in verifier.verdicts.items()})
        figures["false alarms"] = verifier.failed_lines[:3]
    return figures


def corrupt(d: Direction, config: Path, count: int, rows: int) -> tuple[int, int, list[str]]:
    """Corrupt `count` target rows; run one verify; how many were found in the split holding them."""
    rng = random.Random(7)
    rt = TaskRuntime(load_config(config))
    plans = {t: rt.plans.load(t) for t in rt.config.source.table_ids}
    rt.close()
    target = d.postgres.connect(TARGET_DB)
    chosen: list[tuple] = []
    taken: set[tuple] = set()
    with target.cursor() as cur:
        while len(chosen) < count:
            table = rng.choice(list(plans))
            how = rng.choice(["changed", "missing", "extra"])
            key = rows + 1 + len(chosen) if how == "extra" else rng.randint(1, rows)
            if (table, key) in taken:
                continue
            name = f'"{table.namespace}"."{table.name}"'
            if how == "changed":
                cur.execute(f"UPDATE {name} SET c = 'corrupted' WHERE id = %s", (key,))
            elif how == "missing":
                cur.execute(f"DELETE FROM {name} WHERE id = %s", (key,))
            else:
                cur.execute(f"INSERT INTO {name} (id, k, c, pad) VALUES (%s, 1, 'extra', 'extra')", (key,))
            if cur.rowcount == 1:
                taken.add((table, key))
                chosen.append((table, key, how))
    target.close()
    out = subprocess.run(cli(config, "verify", "--wait", "60"), capture_output=True, text=True, cwd=REPO).stdout
    failed = {line.split(": FAILED")[0]: line for line in out.splitlines() if ": FAILED" in line}
    found, missed = 0, []
    for table, key, how in chosen:
        plan = plans[table]
        [split] = [s for s in plan.splits if in_range(plan.key_kind, key, s.range)]
        line = failed.get(split.id, "")
        if re.search(rf"[(; ]{key}[;)]", line):
            found += 1
        else:
            missed.append(f"{table} {key} ({how}) in {split.id}")
    return found, len(chosen), missed


def bench(kind: str, args, mariadb, postgres) -> None:
    d = Direction(kind, mariadb, postgres, Path(args.dir), args.tables)
    reset(d, args)
    config = d.config(args.rows)
    subprocess.run(cli(config, "snapshot"), check=True, capture_output=True, cwd=REPO)
    syncer = subprocess.Popen(cli(config, "sync"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    try:
        time.sleep(10)  # the sync's first checkpoint
        print(f"\n{kind} -> postgres: {args.tables} tables x {args.rows:,} rows, sysbench oltp_write_only at "
              f"{args.rate} tx/s (4 threads), {args.seconds} s per phase")
        results = {}
        for name, extra, pace in PHASES:
            results[name] = phase(d, args, d.config(args.rows, pace) if pace else config, extra)
            f = results[name]
            verify = (f", {f['rounds']} full verify rounds; split verdicts: {f['passed']} passed, {f['failed']} FAILED, "
                      f"{f['inconclusive']} inconclusive" if extra is not None else "")
            print(f"  {name:18} transactions {f['transactions']:.0f}, app errors {f['ignored errors']:.0f} "
                  f"(fatal {f['fatal']}), deadlocks {f['deadlocks']}, latency avg {f['avg ms']:.2f} ms, "
                  f"p99 {f['p99 ms']:.2f} ms{verify}")
            for line in f.get("false alarms", []):
                print(f"    false alarm: {line[:300]}")
        base = results["no verification"]["p99 ms"]
        for name, _, _ in PHASES[1:]:
            print(f"  p99 with {name}: {results[name]['p99 ms'] / base:.2f}x the run without verification")
        found, total, missed = corrupt(d, config, args.corruptions, args.rows)
        print(f"  corruptions: {found}/{total} found in the split holding them" +
              (f"; missed: {', '.join(missed[:5])}" if missed else ""))
    finally:
        syncer.terminate()
        syncer.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--direction", choices=("mysql", "postgres", "both"), default="both")
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--rate", type=int, default=100, help="sysbench transactions per second")
    parser.add_argument("--seconds", type=int, default=60, help="length of each phase")
    parser.add_argument("--corruptions", type=int, default=50)
    parser.add_argument("--dir", default="/tmp/cdc-bench-verify")
    args = parser.parse_args()
    mariadb, postgres = start_servers(Path(args.dir) / "servers")
    for kind in ("mysql", "postgres") if args.direction == "both" else (args.direction,):
        bench(kind, args, mariadb, postgres)


if __name__ == "__main__":
    main()
