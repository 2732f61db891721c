"""The MySQL/MariaDB binlog as the task's log: reader, start positions and distances."""
from __future__ import annotations

from datetime import datetime

from cdc_assets.core.headroom import Headroom, Level
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.sources.mysql import retention, stream_start
from cdc_assets.sources.mysql.binlog import BinlogReader
from cdc_assets.sources.mysql.stream import default_server_id
from cdc_assets.sources.mysql.stream_start import FIRST_EVENT_OFFSET
from cdc_assets.sources.mysql.timestamps import find_position_at


class MysqlLog:
    distance_unit = "bytes"  # of binlog

    def __init__(self, url: DbUrl, task_id: str) -> None:
        self.url = url
        self.task_id = task_id

    def prepare(self, tables: list[TableId], replan: bool = False) -> None:
        """Nothing to create: the server keeps binlogs by its own expiry settings."""

    def reader(self, schemas: dict[TableId, TableSchema], purpose: str = "sync",
               source_text: bool = False) -> BinlogReader:  # the binlog carries binary values, not texts
        # One server id per purpose: a replica connection with a taken id kicks the other one off.
        return BinlogReader(self.url, default_server_id(f"{self.task_id}#{purpose}"), schemas)

    def earliest(self) -> MysqlPosition:
        """The start of the oldest binlog file, with the server and GTID set there: it is compared with
        positions that may be another server's (see core/positions.py)."""
        conn = connect(self.url, database="")
        try:
            state = stream_start.read_state(conn)
            first = MysqlPosition(state.files[0], FIRST_EVENT_OFFSET)
            return stream_start.resolved(first, state, conn)
        finally:
            conn.close()

    def position_at(self, when: datetime) -> MysqlPosition:
        return find_position_at(self.url, when.timestamp())

    def distance(self, a: MysqlPosition, b: MysqlPosition) -> int | None:
        """Binlog bytes from `a` to `b` (0 when `b` is not after `a`); None when they are positions of different
        servers (after a failover, until a checkpoint on the new server), whose files cannot be added up."""
        if not a.same_server(b):
            return None
        sizes = dict(self._files())
        if a.file == b.file:
            return max(0, b.pos - a.pos)
        names = sorted(sizes, key=lambda f: MysqlPosition(f, 0).sort_key())
        between = [f for f in names if a.sort_key() < MysqlPosition(f, 0).sort_key() < b.sort_key()]
        return max(0, sizes.get(a.file, a.pos) - a.pos) + sum(sizes[f] for f in between if f != b.file) + b.pos

    def headroom(self, needed: MysqlPosition | None) -> Headroom:
        """The binlog file `needed` lies in against the server's retention."""
        if needed is None:
            return Headroom(Level.OK, "no position recorded yet: the binlog is not needed yet")
        return retention.headroom(self.url, needed)

    def _files(self) -> list[tuple[str, int]]:
        conn = connect(self.url, database="")
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                return [(row[0], int(row[1])) for row in cur.fetchall()]
        finally:
            conn.close()
