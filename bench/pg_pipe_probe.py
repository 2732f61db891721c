"""Probe for the next step of the snapshot's speed (issue 11), not the product's path: a PostgreSQL→PostgreSQL
snapshot whose rows never enter a JVM. Each of 2 worker processes pipes `COPY (SELECT ...) TO STDOUT` of one split
(100,000 rows) into a staging `COPY`, groups of 2 splits as the engine groups them, while this process commits the
previous group (`INSERT ... SELECT` into the indexed target). Needs the table `bench/snapshot.py` seeded.

    python bench/pg_pipe_probe.py [--rows 3000000] [--dir /tmp/cdc-bench]

Prints its seconds beside the limit (export + COPY) measured in the same run.
"""
from __future__ import annotations

import argparse
import io
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import psycopg2

from bench.snapshot import SHAPE, limit_pg_to_pg, reset_target
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import postgres_args
from cdc_assets.dev.servers import start_servers

SPLIT = 100_000
_ARGS: dict = {}


def _stage(job: tuple[int, int, int, str]) -> int:
    index, low, high, staging = job
    src, tgt = psycopg2.connect(**_ARGS["source"]), psycopg2.connect(**_ARGS["target"])
    rows = io.BytesIO()  # a split of this table is ~10 MB; a product would stream through a pipe
    try:
        with src.cursor() as cur:
            cur.execute("SET extra_float_digits = 3; SET DateStyle = ISO; SET TimeZone = UTC")
            cur.copy_expert(f"COPY (SELECT {index}, id, a, b, c, d, e FROM bench.rows6 "
                            f"WHERE id >= {low} AND id < {high}) TO STDOUT", rows)
        rows.seek(0)
        with tgt, tgt.cursor() as cur:
            cur.copy_expert(f"COPY {staging} FROM STDIN", rows)
    finally:
        src.close()
        tgt.close()
    return index


def _init(args: dict) -> None:
    _ARGS.update(args)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--dir", default="/tmp/cdc-bench")
    args = parser.parse_args()
    base = Path(args.dir)
    _, postgres = start_servers(base / "servers")
    urls = {"source": postgres.url("benchsrc"), "target": postgres.url("warehouse")}
    conn_args = {k: postgres_args(DbUrl.parse(u, k)) for k, u in urls.items()}
    reset_target(postgres)
    conn = psycopg2.connect(**conn_args["target"])
    conn.autocommit = True
    cur = conn.cursor()
    typed = SHAPE.format(ts="TIMESTAMP(6)")
    cur.execute(f"CREATE SCHEMA bench; CREATE TABLE bench.rows6 ({typed})")
    splits = args.rows // SPLIT
    groups = [[(i, i * SPLIT + 1, (i + 1) * SPLIT + 1) for i in range(g, min(g + 2, splits))]
              for g in range(0, splits, 2)]
    for n in range(len(groups)):
        cur.execute(f"CREATE UNLOGGED TABLE bench.stg{n} (_split int, {typed.replace(' PRIMARY KEY', '')})")
    started, committing = time.monotonic(), 0.0
    with Pool(2, initializer=_init, initargs=(conn_args,)) as pool:
        pending = None
        for n, group in enumerate(groups):
            staged = pool.map_async(_stage, [(i, low, high, f"bench.stg{n}") for i, low, high in group])
            if pending is not None:
                committing += _commit(cur, pending)
            staged.get()
            pending = n
        committing += _commit(cur, pending)
    took = time.monotonic() - started
    cur.execute("SELECT count(*) FROM bench.rows6")
    rows = cur.fetchone()[0]
    conn.close()
    reset_target(postgres)
    limit = limit_pg_to_pg(postgres, base)
    print(f"{rows:,} rows piped in {took:.1f} s (commits {committing:.1f} s) | limit (export + COPY) {limit:.1f} s | "
          f"ratio {limit / took:.2f}")
    return 0


def _commit(cur, n: int) -> float:
    started = time.monotonic()
    cur.execute(f"BEGIN; INSERT INTO bench.rows6 SELECT id, a, b, c, d, e FROM bench.stg{n}; COMMIT; "
                f"DROP TABLE bench.stg{n}")
    return time.monotonic() - started


if __name__ == "__main__":
    sys.exit(main())
