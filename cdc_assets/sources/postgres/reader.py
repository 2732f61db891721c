"""`PgLogReader`: the log reader over a logical replication slot, on a replication connection streaming the
built-in `pgoutput` plugin (replication.py); `pgoutput.decode` reads each message, `Assembler` turns the messages
into events, `Feedback` says what the server may release.

Facts this relies on (PostgreSQL 15 "Streaming Replication Protocol"):
- XLogData's walEnd is the message's own LSN (0 for Relation), a keepalive's walEnd is how far decoding got:
  everything committed before it was already sent;
- the slot keeps WAL from its restart_lsn until the client reports a later flush position (see `Feedback`).
"""
from __future__ import annotations

import select
import threading
import time
from collections.abc import Iterator

from cdc_assets.core.events import Idle, Transaction, TransactionPart
from cdc_assets.core.boundary import LogItem
from cdc_assets.core.positions import PgPosition
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.errors import SourceSetupError
from cdc_assets.sources.postgres import pgoutput
from cdc_assets.sources.postgres.assembly import Assembler
from cdc_assets.sources.postgres.catalog import Catalog
from cdc_assets.sources.postgres.feedback import Feedback
from cdc_assets.sources.postgres.partitions import partitions_of
from cdc_assets.sources.postgres.replication import ReplicationConnection
from cdc_assets.sources.postgres.slot import advance_slot

IDLE_AFTER = 1.0  # seconds without a yield before an Idle
POLL_INTERVAL = 0.2  # seconds select() waits for the replication socket


class PgLogReader:
    """Reads committed transactions of the captured tables from a logical replication slot; the `LogReader`
    protocol of cdc_assets/core/boundary.py.

    Positions are WAL LSNs: a Transaction ends at its commit's end LSN, an Idle at the last commit end or the
    server's decoding position (keepalive walEnd), whichever is later. Values: see `values.caster`; a row image may
    lack unchanged TOASTed columns (absent, never None). `before` is the full old row with REPLICA IDENTITY
    FULL, only the key columns when the key changed (or for a delete) with the default identity, else None.

    `acknowledge` reports a flush position to the server, which then may drop the WAL before it; psycopg2 may
    report a keepalive's position beyond it only when nothing handed out lies in between (see `Feedback`), so
    that an idle slot stops holding WAL back. While the reader holds back for that reason it yields
    Idle(flush=True): the consumer should commit what it has. A consumer that never acknowledges (`acknowledged`
    False: a bounded look at the log) is not waited for, and the slot may then be confirmed past what it read.
    With `source_text`, values outside the key stay the text pgoutput sent (see `Sink.parses_source_text`).
    """

    def __init__(self, url: DbUrl, slot: str, publication: str, schemas: dict[TableId, TableSchema],
                 acknowledged: bool = True, source_text: bool = False) -> None:
        if not url.database:
            raise SourceSetupError(f"source url {url} names no database",
                                   "add it: postgresql://user@host:5432/<database>")
        self.url = url
        self.slot = slot
        self.publication = publication
        self.schemas = schemas
        self.acknowledged = acknowledged
        self.source_text = source_text
        self._replication: ReplicationConnection | None = None  # while a read streams
        self._closed = False
        self._ack: PgPosition | None = None  # sent by the reading thread: a replication cursor is not shared
        self._acked = threading.Event()  # wakes a reader that holds back

    def read(self, start: PgPosition, stop_at: PgPosition | None = None, part_events: int | None = None
             ) -> Iterator[LogItem]:
        """Yield what committed after `start`: Transactions with captured changes, SchemaChanges of captured
        tables, and Idle(position) after ~1 s without either. With `part_events`, a transaction's changes
        come in TransactionParts of that many before its Transaction (which holds the rest).

        With `stop_at`, return after the transaction ending at or after it, or once the stream is quiet and
        the server decoded up to it; the last position is reported (as Idle) before returning. Without it,
        read until `close()`. Raises PositionLost (slot or publication missing), SourceSetupError,
        UnreachableError."""
        if stop_at is not None and stop_at.lsn <= start.lsn:
            return
        owners = self._partitions()
        replication = ReplicationConnection(self.url, self.slot, self.publication)
        catalog = None
        try:
            catalog = Catalog(self.url, self.schemas)
            replication.start(start)
            self._replication = replication
            yield from self._stream(replication, start, stop_at, catalog, part_events, owners)
        finally:
            self._replication = None
            replication.close()
            if catalog is not None:
                catalog.close()

    def _stream(self, replication: ReplicationConnection, start: PgPosition, stop_at: PgPosition | None,
                catalog: Catalog, part_events: int | None, owners: dict) -> Iterator:
        cursor = replication.cursor
        asm = Assembler(start, self.schemas, cursor, catalog, part_events, owners, self.source_text)
        feedback = Feedback(replication.send_feedback, start.lsn)
        sent = reported = start  # `sent`: every transaction committing before it was received
        last_yield = time.monotonic()
        holding_back = False
        while not self._closed:
            if (ack := self._ack) is not None and ack.lsn > feedback.applied:  # only grows: nothing lost to a race
                feedback.acknowledge(ack.lsn)
            message = None
            if feedback.may_read() or not self.acknowledged:
                holding_back = False
                message = replication.read_message()
            elif not holding_back:  # the consumer should commit what it holds, now
                holding_back = True
                yield Idle(sent, flush=True)
                reported, last_yield = sent, time.monotonic()
            else:
                feedback.hold_back()
            if message is not None:
                feedback.received(message.data_start)
                for item in asm.feed(pgoutput.decode(message.payload)):
                    # A part is committed with its transaction's end, which lies at or after a keepalive's walEnd
                    # sent while the transaction streams: a confirmation then never skips it.
                    if not isinstance(item, TransactionPart):
                        feedback.handing_out((item.end if isinstance(item, Transaction) else item.position).lsn)
                    yield item
                    reported, last_yield = asm.boundary, time.monotonic()
            if not asm.inside:  # walEnd of a keepalive, or of the Commit just read
                sent = PgPosition(max(sent.lsn, asm.boundary.lsn, cursor.wal_end))
            if stop_at is not None and not asm.inside and sent.lsn >= stop_at.lsn:
                if sent != reported:
                    yield Idle(sent)
                return
            if time.monotonic() - last_yield >= IDLE_AFTER:  # quiet, or busy with transactions already applied
                yield Idle(sent, flush=holding_back)
                reported, last_yield = sent, time.monotonic()
            if holding_back:
                # Cleared here, not per message (a cost per change): an acknowledgement set before the clear is
                # seen by the check below, one set after it ends the wait.
                self._acked.clear()
                if (ack := self._ack) is None or ack.lsn <= feedback.applied:
                    self._acked.wait(POLL_INTERVAL)
            elif message is None:
                select.select([cursor], [], [], POLL_INTERVAL)

    def acknowledge(self, position: PgPosition) -> None:
        """The target stored everything up to `position`: let the slot release the WAL before it. Safe to call
        from another thread than the one reading."""
        if self._replication is not None:
            self._ack = position
            self._acked.set()
        else:
            advance_slot(self.url, self.slot, position)

    def close(self) -> None:
        self._closed = True

    def _partitions(self) -> dict[TableId, TableId]:
        """The partitions of the captured tables. The publication publishes their changes under the partitioned
        table; WAL decoded with a publication made before it did so still names the leaves."""
        if not self.schemas:
            return {}
        conn = connect(self.url)
        try:
            return partitions_of(conn, list(self.schemas))
        finally:
            conn.close()
