"""XA transactions in the binlog: a group ending in XA_PREPARE_LOG_EVENT is held under its xid, nothing
committed, until the server logs its outcome, "XA COMMIT xid" or "XA ROLLBACK xid", as a group of its own."""
from __future__ import annotations

import re
from collections.abc import Callable

from pymysqlreplication.event import MariadbGtidEvent, XAPrepareEvent

from cdc_assets.core.events import RowChange
from cdc_assets.core.positions import MysqlPosition

FL_PREPARED_XA = 64  # MariaDB Gtid_log_event flags2: the group is an XA PREPARE's (log_event.h)
XA_START = re.compile(r"XA\s+(?:START|BEGIN)\b", re.I)
# How the server logs the outcome of a prepared XA: its xid as gtrid, bqual in hex, then formatID.
XA_OUTCOME = re.compile(r"XA\s+(?P<outcome>COMMIT|ROLLBACK)\s+X'(?P<gtrid>[0-9A-F]*)'\s*,\s*X'(?P<bqual>[0-9A-F]*)'"
                        r"\s*,\s*(?P<format>\d+)\s*;?", re.I)

XaId = tuple[bytes, bytes, int]  # gtrid, bqual, formatID
XaLookup = Callable[[XaId, MysqlPosition], list[RowChange]]


def flags_xa(event) -> bool:
    """Whether a GTID event opens an XA PREPARE's group: MariaDB flags it there; MySQL logs "XA START" inside
    the group instead (`XA_START`)."""
    return isinstance(event, MariadbGtidEvent) and bool(event.flags & FL_PREPARED_XA)


class XaHolds:
    """The changes of the XAs prepared since the stream's start and not decided yet (`prepared`, by xid).

    An XA prepared before the start and committed after it is not held: `lookup` finds its changes further back
    in the log (without one, such a commit is taken as the end of a group of nothing captured)."""

    def __init__(self, lookup: XaLookup | None = None) -> None:
        self.prepared: dict[XaId, list[RowChange]] = {}
        self._lookup = lookup

    def hold(self, event: XAPrepareEvent, changes: list[RowChange]) -> None:
        self.prepared[event.xid_gtrid, event.xid_bqual, event.xid_format_id] = changes

    def decided(self, outcome: re.Match, end: MysqlPosition) -> list[RowChange] | None:
        """The changes an `XA_OUTCOME` statement ending at `end` commits; None when it rolls them back."""
        xid = bytes.fromhex(outcome["gtrid"]), bytes.fromhex(outcome["bqual"]), int(outcome["format"])
        changes = self.prepared.pop(xid, None)
        if outcome["outcome"].upper() == "ROLLBACK":
            return None
        if changes is None:
            changes = self._lookup(xid, end) if self._lookup is not None else []
        return changes
