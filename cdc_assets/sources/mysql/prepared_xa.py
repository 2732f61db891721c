"""XA transactions prepared before a stream's start and committed after it: their changes, found further back
in the binlog."""
from __future__ import annotations

from cdc_assets.core.events import RowChange
from cdc_assets.core.positions import MysqlPosition, is_before
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import REPLAN_HINT, PositionLost, UnreachableError
from cdc_assets.sources.mysql.assembly import Assembler
from cdc_assets.sources.mysql.xa_holds import XaId
from cdc_assets.sources.mysql.stream import READER_EVENTS, binary_logs, fetch, open_stream
from cdc_assets.sources.mysql.stream_start import FIRST_EVENT_OFFSET

MAX_STALLS = 5  # reopenings in a row of a re-read ended early (see stream.fetch) that completed no group


class PreparedBefore:
    """Changes of XA transactions prepared before `start` and still pending there, for their XA COMMIT after it.

    A checkpoint, a watermark or a startup position may lie between an XA's PREPARE and its COMMIT. The binlog
    is re-read from the start of `start`'s file up to `start`, then from one file earlier, and so on, until the
    xid turns up; each re-read uses its own server_id, as the reader's own stream stays open meanwhile.

    When `start` is another server's (a GTID resume after a failover) its file/offset cannot say where to stop
    re-reading this server's files: such an XA COMMIT is refused, naming the XA and the way out."""

    def __init__(self, url: DbUrl, server_id: int, schemas: dict[TableId, TableSchema], start: MysqlPosition,
                 server: str = "") -> None:
        self.url, self.server_id, self.schemas, self.start, self.server = url, server_id, schemas, start, server
        self._pending: dict[XaId, list[RowChange]] = {}
        self._scanned_from: MysqlPosition | None = None

    def __call__(self, xid: XaId, commit: MysqlPosition) -> list[RowChange]:
        if xid in self._pending:
            return self._pending[xid]
        gtrid, bqual, format_id = xid
        if not self.start.same_server(MysqlPosition("", 0, "", self.server)):
            raise PositionLost(f"the XA transaction X'{gtrid.hex()}',X'{bqual.hex()}',{format_id} committed at {commit} "
                               f"on server {self.server} ({self.url}) was prepared before {self.start}, a position of "
                               "another server (the task resumed there by GTID after a failover): where its changes "
                               "lie in this server's binlog is unknown", REPLAN_HINT)
        firsts = [MysqlPosition(f, FIRST_EVENT_OFFSET) for f in binary_logs(self.url)]
        for first in reversed([f for f in firsts if not is_before(self.start, f)]):
            if self._scanned_from is not None and not is_before(first, self._scanned_from):
                continue
            self._pending, self._scanned_from = self._pending_at_start(first), first
            if xid in self._pending:
                return self._pending[xid]
        raise PositionLost(f"the XA transaction X'{gtrid.hex()}',X'{bqual.hex()}',{format_id} committed at {commit} "
                           f"in the binlog of {self.url} was prepared before {self.start}, in a binlog that is no "
                           f"longer there (read back from {self._scanned_from}, the oldest file listed): its changes "
                           "cannot be read", REPLAN_HINT)

    def _pending_at_start(self, first: MysqlPosition) -> dict[XaId, list[RowChange]]:
        """The XAs prepared from `first` on and still pending at `start`. The re-read must reach `start`, which
        the log holds: a stream that ends short of it (its dump thread ended under it) is reopened at the last
        group it completed, as the reader's own stream is."""
        asm = Assembler(first, self.schemas, str(self.url), statements_stop=False)
        stalls = 0
        while is_before(asm.boundary, self.start):
            asm.restart()
            opened_at = asm.boundary
            stream = open_stream(self.url, self.server_id, opened_at, READER_EVENTS, self.schemas)
            try:
                while is_before(asm.boundary, self.start) and (event := fetch(stream, self.url, opened_at)) is not None:
                    asm.feed(event)
            finally:
                stream.close()
            stalls = stalls + 1 if asm.boundary == opened_at else 0
            if stalls == MAX_STALLS:
                raise UnreachableError(
                    f"re-reading the binlog of {self.url} from {first} for XA transactions pending at {self.start}, "
                    f"the stream ended {MAX_STALLS} times in a row at {opened_at} without completing a transaction",
                    "run again: the read resumes from the last checkpoint")
        return asm.xas.prepared
