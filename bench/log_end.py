"""What reading the source's log end costs a MariaDB server, as its current binlog file grows.

    python bench/log_end.py [--sizes 10,100,300] [--row-bytes 1000] [--calls 20] [--dir /tmp/cdc-bench-log-end]

Every watermark of a split, every window of a verification, each check of the Dagster sensor reads the log end
(`MysqlSource.current_position`: file, offset and the GTID set logged up to there). On a private MariaDB whose
current binlog file is grown to each of --sizes MB by transactions of one row of --row-bytes, --calls reads of the log
end, each way: as the product reads it (the offset between two equal reads of @@gtid_binlog_pos,
sources/mysql/log_end.py), and with BINLOG_GTID_POS at the offset (the scan of the file it replaces). Per way and
size: the wall time of a read and the CPU seconds mariadbd spent on it (/proc), and the files the server opened
(its Opened_files status). Prints figures, never asserts.
"""
from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

from cdc_assets.core.urls import DbUrl
from cdc_assets.dev.mariadb import MariaDbServer
from cdc_assets.dev.processes import free_port
from cdc_assets.sources.mysql.source import MysqlSource

MB = 1 << 20
_TICKS = os.sysconf("SC_CLK_TCK")


def server_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def opened_files(cur) -> int:
    cur.execute("SHOW GLOBAL STATUS LIKE 'Opened_files'")
    return int(cur.fetchone()[1])


def grow_to(cur, megabytes: int, row_bytes: int) -> int:
    """Commit one-row inserts of `row_bytes` until the current binlog file holds `megabytes` MB; its offset. The
    scan's cost is per event as much as per byte: OLTP's small transactions log many events per MB."""
    body = "x" * row_bytes
    while True:
        cur.execute("SHOW MASTER STATUS")
        offset = int(cur.fetchone()[1])
        if offset >= megabytes * MB:
            return offset
        for _ in range(500):
            cur.execute("INSERT INTO filler (body) VALUES (%s)", (body,))


def measure(server: MariaDbServer, cur, read, calls: int) -> tuple[float, float, int]:
    """(wall ms per read, mariadbd CPU ms per read, files opened) over `calls` reads."""
    files, cpu, started = opened_files(cur), server_cpu(server.pid), time.perf_counter()
    for _ in range(calls):
        read()
    wall = (time.perf_counter() - started) / calls * 1000
    return wall, (server_cpu(server.pid) - cpu) / calls * 1000, opened_files(cur) - files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,100,300", help="sizes of the current binlog file, MB")
    parser.add_argument("--row-bytes", type=int, default=1000, help="bytes of the row each transaction inserts")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--dir", default="/tmp/cdc-bench-log-end")
    args = parser.parse_args()
    base = Path(args.dir)
    shutil.rmtree(base, ignore_errors=True)
    server = MariaDbServer(base / "mariadb", free_port()).start()
    try:
        server.create_database("bench")
        conn = server.connect("bench")
        source = MysqlSource(DbUrl.parse(server.url("bench")))
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE filler (id INT AUTO_INCREMENT PRIMARY KEY, body TEXT)")
            print(f"MariaDB, log end read {args.calls} times per way and size (wall ms / mariadbd CPU ms / files "
                  "opened per read)")
            print(f"{'binlog file':>12} | {'the product (bracket)':>24} | {'BINLOG_GTID_POS scan':>24}")
            for size in (int(s) for s in args.sizes.split(",")):
                offset = grow_to(cur, size, args.row_bytes)

                def scan() -> None:  # the log end as it was read before: the status, then the scan at its offset
                    cur.execute("SHOW MASTER STATUS")
                    end = cur.fetchone()
                    cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (end[0], end[1]))
                    cur.fetchone()
                    cur.execute("SELECT @@GLOBAL.server_id")
                    cur.fetchone()

                ours = measure(server, cur, source.current_position, args.calls)
                theirs = measure(server, cur, scan, args.calls)
                line = " | ".join(f"{w:8.2f} / {c:7.2f} / {f / args.calls:4.1f}" for w, c, f in (ours, theirs))
                print(f"{offset / MB:9.0f} MB | {line}", flush=True)
        source.close()
        conn.close()
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
