"""MySQL/MariaDB binlog as a log reader: whole committed transactions of the captured tables, with values
normalised to what the snapshot reads, through pymysqlreplication.

Binlog facts this relies on (MySQL internals manual "Binary Log Events", MariaDB KB "Replication Protocol"):
- every event header carries `log_pos`, the offset just *after* the event in its file;
- a transaction ends with XID_EVENT (InnoDB) or QUERY_EVENT "COMMIT" (MyISAM/Aria): the offset after it is a
  transaction boundary, the only position handed out;
- MariaDB opens a group with its GTID event alone, MySQL with GTID + QUERY "BEGIN"; DDL is one QUERY event
  standing alone (implicit commit);
- ROTATE_EVENT names the next file; the server first sends a synthetic one (timestamp 0) naming where it starts.

The pieces: values.py (values as the snapshot reads them), ddl.py (which captured tables a statement touches),
assembly.py (events -> transactions) with boundaries.py (positions), row_events.py (rows events -> changes) and
xa_holds.py (XA), prepared_xa.py (XAs prepared before the start), stream.py (open, fetch, errors), timestamps.py
(startup_mode=timestamp). Importing them applies our patches to the library once:
transaction_payload.py (TRANSACTION_PAYLOAD_EVENT in its event map), partial_json.py (read_binary_json) and
json_text.py (parse_opaque).
"""
from __future__ import annotations

import time
from collections.abc import Iterator

from cdc_assets.core.events import Idle, SchemaChange, Transaction, TransactionPart
from cdc_assets.core.positions import MysqlPosition, is_before
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.sources.mysql import stream_start
from cdc_assets.sources.mysql.assembly import Assembler
from cdc_assets.sources.mysql.prepared_xa import PreparedBefore
from cdc_assets.sources.mysql.stream import READER_EVENTS, default_server_id, fetch, open_stream
from cdc_assets.sources.mysql.stream_start import StreamStart

IDLE_AFTER = 1.0  # seconds without a yield before an Idle


class BinlogReader:
    """Reads committed transactions of the captured tables from a MySQL/MariaDB binlog; the `LogReader`
    protocol of cdc_assets/core/boundary.py.

    `server_id` must differ from every other replica of the server: see `default_server_id`.
    Positions are file/offset pairs; `gtid_set` carries the GTID of the transaction that ends there, when seen
    (one GTID, not the server's executed set).

    Values are what the snapshot reads (see `values.converter`): BIT as a padded bit string, binary kinds as bytes,
    JSON as text, SET as members in declared order, DECIMAL as Decimal, TIME as its text, zero dates refused
    (zero_dates.py),
    and TIMESTAMP as a *naive datetime in UTC* (the snapshot reads it in a UTC session). A row image may lack
    columns (binlog_row_image MINIMAL/NOBLOB): those are absent from the change, never None.

    An XA transaction is one Transaction at its XA COMMIT, ending there; a rolled-back one yields nothing.
    """

    def __init__(self, url: DbUrl, server_id: int, schemas: dict[TableId, TableSchema]) -> None:
        self.url = url
        self.server_id = server_id
        self.schemas = schemas
        self._closed = False

    def read(self, start: MysqlPosition, stop_at: MysqlPosition | None = None, part_events: int | None = None
             ) -> Iterator[Transaction | TransactionPart | SchemaChange | Idle]:
        """Yield what committed after `start`: Transactions with captured changes, SchemaChanges of captured
        tables, and Idle(boundary) after ~1 s without either. With `part_events`, a transaction's changes
        come in TransactionParts of that many before its Transaction (which holds the rest).

        With `stop_at`, return after the group ending at or after it, or once the log end reached it; the
        last boundary is reported (as Idle) before returning. Without it, read until `close()`.
        Raises PositionLost (start purged or not an event boundary), UnreachableError, SourceSetupError."""
        state, start = self._server_at(start)
        lookup = PreparedBefore(self.url, default_server_id(f"{self.server_id}#xa"), self.schemas, start,
                                 state.identity)
        begin = stream_start.choose(start, state, self.url)
        asm = Assembler(start, self.schemas, str(self.url), lookup, part_events, state.identity, begin.by_gtid)
        reported, last_yield = start, time.monotonic()
        blocking = stop_at is None  # a bounded read drains the log first, then waits only if it must
        while not self._closed:
            asm.restart()
            opened_at = asm.boundary
            if opened_at != begin.position:  # reopened past the first group: this server's file/offset
                begin = StreamStart(opened_at)
            stream = open_stream(self.url, self.server_id, begin, READER_EVENTS, self.schemas, blocking,
                           state.flavour.mariadb)
            try:
                while not self._closed and (event := fetch(stream, self.url, begin)) is not None:
                    items = asm.feed(event)
                    if items is None:
                        continue
                    for item in items:
                        yield item
                        reported, last_yield = asm.boundary, time.monotonic()
                    if stop_at is not None and not is_before(asm.boundary, stop_at):
                        break
                    if time.monotonic() - last_yield >= IDLE_AFTER:  # quiet, or busy with other tables
                        yield Idle(asm.boundary)
                        reported, last_yield = asm.boundary, time.monotonic()
                else:
                    asm.caught_up(stream.log_file, stream.log_pos)
            finally:
                stream.close()
            if stop_at is not None and not is_before(asm.boundary, stop_at):
                if asm.boundary != reported:
                    yield Idle(asm.boundary)
                return
            blocking = True  # caught up short of stop_at: it lies ahead, wait for it

    def _server_at(self, start: MysqlPosition) -> tuple[stream_start.ServerState, MysqlPosition]:
        conn = connect(self.url, database="")
        try:
            state = stream_start.read_state(conn)
            return state, stream_start.resolved(start, state, conn)
        finally:
            conn.close()

    def acknowledge(self, position: MysqlPosition) -> None:
        """Nothing to release: MySQL keeps binlogs by its own expiry, and our position lives in the checkpoint."""

    def close(self) -> None:
        self._closed = True
