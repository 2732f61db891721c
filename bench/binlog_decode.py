"""Binlog decoding alone, on bench/incremental.py's backlog (inserts, then updates of the same rows): rows/s of
pymysqlreplication decoding every row (its `rows`), and changes/s of our log reader (BinlogReader: decoded,
normalised, assembled into transactions) with the specialised row decoder and without it (every event the
library's way). No target, no engine: the ceiling the log phase's reading puts on MySQL catch-up.

    python bench/binlog_decode.py [--changes 200000] [--repeat 3] [--dir /tmp/cdc-bench-decode]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import incremental as bench  # bench/incremental.py: the same table, backlog and raw reader

import cdc_assets
from cdc_assets.core.events import Transaction, TransactionPart
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.dev.servers import start_servers, stop_servers
from cdc_assets.sources.mysql.binlog import BinlogReader
from cdc_assets.sources.mysql.row_decoder import RowDecoders
from cdc_assets.sources.mysql.source import MysqlSource

SERVER_ID = 4_242_425
PART_EVENTS = 10_000  # as pipeline.transaction_part_events would hand a big transaction out


def read(url: DbUrl, schema, start: MysqlPosition, end: MysqlPosition) -> tuple[int, float]:
    began, changes = time.monotonic(), 0
    for item in BinlogReader(url, SERVER_ID, {schema.table: schema}).read(start, end, PART_EVENTS):
        if isinstance(item, (Transaction, TransactionPart)):
            changes += len(item.changes)
    return changes, time.monotonic() - began


def library_only() -> None:
    """Every rows event the library's way, as before the specialised decoder."""
    RowDecoders.rows = RowDecoders.pairs = lambda *args: None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=200_000, help="backlog size (half inserts, half updates)")
    parser.add_argument("--repeat", type=int, default=3, help="reads of each kind; the best is printed")
    parser.add_argument("--dir", default="/tmp/cdc-bench-decode")
    args = parser.parse_args()
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    mariadb, postgres = start_servers(base / "servers")
    try:
        d = bench.Direction("mysql", mariadb, postgres, base)
        bench.reset(d)
        url = DbUrl.parse(mariadb.url(d.db))
        source = MysqlSource(url)
        start = source.current_position()
        bench.backlog(d, args.changes // 2)
        end = source.current_position()
        schema = source.describe(TableId("benchi", "events"))
        source.close()
        raw = max(n / s for n, s in (bench.raw_mysql(d, (start.file, start.pos)) for _ in range(args.repeat)))
        ours = max(n / s for n, s in (read(url, schema, start, end) for _ in range(args.repeat)))
        library_only()
        before = max(n / s for n, s in (read(url, schema, start, end) for _ in range(args.repeat)))
    finally:
        stop_servers(base / "servers")
    print(f"{os.cpu_count()} CPUs; cdc_assets in {Path(cdc_assets.__file__).parent}; backlog of "
          f"{args.changes // 2 * 2:,} changes ({bench.SHAPE.format(ts='DATETIME(6)')}); best of {args.repeat}")
    print(f"pymysqlreplication, every row decoded:             {raw:>9,.0f} rows/s")
    print(f"BinlogReader, library decode + normalisation:      {before:>9,.0f} changes/s")
    print(f"BinlogReader, specialised row decoder:             {ours:>9,.0f} changes/s "
          f"({ours / before:.1f}x; {ours / raw:.2f} of the library's raw rate)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
