"""What each step of a lock-free verification round costs the source server, one step at a time.

    python bench/verify_cost.py [--direction mysql|postgres|both] [--rows 20000] [--split-rows 5000]
                                [--window-secs 1] [--rate 100] [--dir /tmp/cdc-bench-verify-cost]

On private servers: sysbench prepares 4 tables of --rows rows on the source and writes --window-secs at --rate
transactions/s, the log of a window. Then each step of a round (engine/verify_window.py), repeated, with nothing
else running: the log end read; the split's range read (--split-rows rows) unpaced on the source's open
connection and paced at --split-rows rows/s; then on MariaDB the keys the binlog window changed (a binlog reader
of its own from the window's start to its end), on PostgreSQL the rows' versions read again; and a connection
opened and closed. Per step: the source server's CPU (mariadbd's; on PostgreSQL the postmaster's and every
client backend's, those that ended included) and the wall time. Prints figures, never asserts.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path

import yaml

from cdc_assets.config import load_config
from cdc_assets.core.splits import KeyRange
from cdc_assets.dbapi.connect import connect
from cdc_assets.dev.servers import start_servers, stop_servers
from cdc_assets.engine.changed_keys import changed_in_log
from cdc_assets.engine.runtime import TaskRuntime

SOURCE_DB = "sbcost"
_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int | str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _client_session(pid: str) -> bool:
    """`postgres: user database 127.0.0.1(port) state`: a backend serving a client, not a background process."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().split()
    except OSError:
        return False
    return len(words) >= 4 and "(" in words[3]


def server_cpu(pid: int, postgres: bool) -> float:
    """CPU seconds of the server so far: mariadbd's threads; or the postmaster (forking), its live client backends
    and, through its children's totals, every process that already ended. PostgreSQL's background processes
    (checkpointer, autovacuum...) are left out: they work on their own schedule, not for the step measured."""
    fields = _stat(pid) or []
    used = sum(int(f) for f in fields[11:15 if postgres else 13])
    if postgres:
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and (child := _stat(entry.name)) and int(child[1]) == pid \
                    and _client_session(entry.name):
                used += int(child[11]) + int(child[12])
    return used / _TICKS


def sysbench(server, kind: str, *args: str) -> list[str]:
    if kind == "mysql":
        driver = ["--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={server.port}",
                  f"--mysql-user={server.user}", f"--mysql-password={server.password}", f"--mysql-db={SOURCE_DB}"]
    else:
        driver = ["--db-driver=pgsql", "--pgsql-host=127.0.0.1", f"--pgsql-port={server.port}",
                  "--pgsql-user=postgres", f"--pgsql-db={SOURCE_DB}"]
    return ["sysbench", "oltp_write_only", *driver, "--tables=4", *args]


def bench(kind: str, args, mariadb, postgres, base: Path) -> None:
    server = mariadb if kind == "mysql" else postgres
    server.create_database(SOURCE_DB)
    postgres.create_database(f"{SOURCE_DB}_target")
    subprocess.run(sysbench(server, kind, f"--table-size={args.rows}", "cleanup"), capture_output=True)
    subprocess.run(sysbench(server, kind, f"--table-size={args.rows}", "prepare"), check=True, capture_output=True)
    namespace = SOURCE_DB if kind == "mysql" else "public"
    path = base / f"cost_{kind}.yaml"
    path.write_text(yaml.safe_dump({
        "task_id": f"verify_cost_{kind}",
        "source": {"db_type": kind, "url": server.url(SOURCE_DB), "tables": [f"{namespace}.sbtest1"]},
        "target": {"db_type": "postgres", "url": postgres.url(f"{SOURCE_DB}_target")},
        "runtime": {"data_dir": str(base / f"state_{kind}")},
    }))
    rt = TaskRuntime(load_config(path))
    try:
        schema = rt.source.describe(rt.config.source.table_ids[0])
        split = KeyRange(args.split_rows, 2 * args.split_rows)  # one split of --split-rows keys
        target = rt.sink.target_format()
        low = rt.source.current_position()
        subprocess.run(sysbench(server, kind, f"--table-size={args.rows}", f"--rate={args.rate}", "--threads=4",
                                f"--time={args.window_secs}", "run"), check=True, capture_output=True)
        end = rt.source.current_position()
        read = rt.source.read_split(schema, split, "int", target)
        steps = [("log end", lambda: rt.source.current_position(), 300),
                 (f"range read, {args.split_rows:,} rows", lambda: rt.source.read_split(schema, split, "int", target),
                  30),
                 (f"range read paced at {args.split_rows:,} rows/s",
                  lambda: rt.source.read_split(schema, split, "int", target, args.split_rows), 10)]
        if kind == "mysql":
            steps.append((f"binlog window of {args.window_secs} s", lambda: changed_in_log(rt, schema, low, end), 20))
        else:
            steps.append(("row versions read again", lambda: rt.source.changed_since(schema, split, "int", target,
                                                                                     read), 30))
        steps.append(("connection opened and closed", lambda: connect(rt.config.source.db_url).close(), 100))
        print(f"\n{kind} source: sbtest1 of {args.rows:,} rows; a window of {args.window_secs} s at {args.rate} tx/s "
              f"({low} .. {end})")
        for name, step, times in steps:
            step()
            cpu, wall = server_cpu(server.pid, kind == "postgres"), time.perf_counter()
            for _ in range(times):
                step()
            cpu, wall = server_cpu(server.pid, kind == "postgres") - cpu, time.perf_counter() - wall
            print(f"  {name:36} server CPU {1000 * cpu / times:6.2f} ms, wall {1000 * wall / times:7.2f} ms "
                  f"(mean of {times})", flush=True)
    finally:
        rt.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--direction", choices=("mysql", "postgres", "both"), default="both")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--split-rows", type=int, default=5_000)
    parser.add_argument("--window-secs", type=int, default=1)
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--dir", default="/tmp/cdc-bench-verify-cost")
    args = parser.parse_args()
    base = Path(args.dir)
    mariadb, postgres = start_servers(base / "servers")
    try:
        for kind in ("mysql", "postgres") if args.direction == "both" else (args.direction,):
            bench(kind, args, mariadb, postgres, base)
    finally:
        stop_servers(base / "servers")


if __name__ == "__main__":
    main()
