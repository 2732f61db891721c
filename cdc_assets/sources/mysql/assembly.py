"""Binlog events -> transactions: groups, XA PREPARE/COMMIT, parts of big transactions and schema changes of
captured tables (see `Assembler`), over the parts that track boundaries and decode rows events."""
from __future__ import annotations

import re

from pymysqlreplication.event import (GtidEvent, HeartbeatLogEvent, MariadbGtidEvent, QueryEvent, RotateEvent,
                                      XAPrepareEvent, XidEvent)
from pymysqlreplication.row_event import DeleteRowsEvent, PartialUpdateRowsEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_assets.core.events import SchemaChange, Transaction, TransactionPart
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.errors import UnreachableError
from cdc_assets.sources.mysql.boundaries import Boundaries
from cdc_assets.sources.mysql.ddl import classify, ddl_tables, renamed_tables
from cdc_assets.sources.mysql.load_query import LoadQueryEvent
from cdc_assets.sources.mysql.logged_statements import StatementStop
from cdc_assets.sources.mysql.row_events import RowEvents
from cdc_assets.sources.mysql.transaction_payload import TransactionPayloadEvent, events_of
from cdc_assets.sources.mysql.xa_holds import XA_OUTCOME, XA_START, XaHolds, XaLookup, flags_xa

_TRANSACTION_CONTROL = re.compile(r"(?:SAVEPOINT|RELEASE\s+SAVEPOINT|ROLLBACK\s+(?:WORK\s+)?TO|XA)\b", re.I)
_TRANSACTION_END = re.compile(r"(?:COMMIT|ROLLBACK)(?:\s+WORK)?\s*;?", re.I)


class Assembler:
    """Groups library events into transactions and tracks the last boundary.

        OUTSIDE --GTID / "BEGIN"--> INSIDE --row events--> INSIDE --XID / "COMMIT"--> OUTSIDE: Transaction
        OUTSIDE or INSIDE (MariaDB's GTID) --other QUERY (DDL)--> OUTSIDE: SchemaChange per captured table
        INSIDE --XA_PREPARE_LOG_EVENT--> OUTSIDE: the changes are held under the XA's xid, nothing committed
        OUTSIDE --GTID, QUERY "XA COMMIT xid"--> OUTSIDE: Transaction of the held changes, at the commit's end
        OUTSIDE --GTID, QUERY "XA ROLLBACK xid"--> OUTSIDE: the held changes are dropped

    A "ROLLBACK" that reaches the binlog ends a group too: only non-transactional changes are logged before
    it, and those did happen. `feed` returns None inside a group and a list (maybe empty) at each group end
    and at each heartbeat; with `part_events`, also TransactionParts of exactly that many changes inside a
    group whenever that many are held, so that no more are held at once. An XA group is never handed out in
    parts: whether its rows apply is known only at its XA COMMIT or ROLLBACK, so they are held whole.

    Its parts: `at` (boundaries.py) knows where the stream stands and the last boundary with its GTID set
    (`server`, `by_gtid`: see there); `rows` (row_events.py) adds rows events' changes to the open group;
    `xas` (xa_holds.py) holds prepared XAs until their outcome (`lookup` finds one prepared before `start`);
    `statements` (logged_statements.py) stops the read at a DML statement on a captured table (binlog_format
    STATEMENT/MIXED), unless `statements_stop` is False.
    """

    def __init__(self, start: MysqlPosition, schemas: dict[TableId, TableSchema], where: str,
                 lookup: XaLookup | None = None, part_events: int | None = None, server: str | None = None,
                 by_gtid: bool = False, statements_stop: bool = True) -> None:
        self.at = Boundaries(start, start.server if server is None else server, by_gtid)
        self.rows = RowEvents(schemas, where, self.at)
        self.statements = StatementStop(schemas, where, self.at, statements_stop)
        self.xas = XaHolds(lookup)
        self.schemas = schemas
        self.where = where
        self.part_events = part_events
        self.gtid = ""  # the open group's
        self.parted = False  # parts of the current group were handed out
        self.xa = False  # the current group is an XA transaction's: held whole until its outcome
        rows = self.rows
        self._handlers = {
            WriteRowsEvent: rows.insert, UpdateRowsEvent: rows.update, PartialUpdateRowsEvent: rows.update,
            DeleteRowsEvent: rows.delete, XidEvent: self._xid, QueryEvent: self._query,
            RotateEvent: self._rotate, GtidEvent: self._gtid, MariadbGtidEvent: self._gtid,
            HeartbeatLogEvent: self._heartbeat, XAPrepareEvent: self._xa_prepare,
            TransactionPayloadEvent: self._payload, LoadQueryEvent: self._load_query,
        }

    @property
    def boundary(self) -> MysqlPosition:
        return self.at.boundary

    @property
    def inside(self) -> bool:
        return self.at.inside

    def feed(self, event) -> list[Transaction | TransactionPart | SchemaChange] | None:
        items = self._handlers[type(event)](event)
        if items is None and self.part_events and not self.xa and len(self.rows.changes) >= self.part_events:
            return self._parts()
        return items

    def _parts(self) -> list[TransactionPart]:
        # A row event's position lies inside its group, so strictly before the group's end.
        n, changes = self.part_events, self.rows.changes
        parts = [TransactionPart(changes[i:i + n], changes[i + n - 1].position)
                 for i in range(0, len(changes) - n + 1, n)]
        self.rows.changes, self.parted = changes[len(parts) * n:], True
        return parts

    def restart(self) -> None:
        """Forget a partial group: the stream reopens at the boundary."""
        if self.parted:  # re-reading the group would hand its first parts out twice
            raise UnreachableError(f"the binlog stream of {self.where} ended inside a transaction handed out in "
                                   "parts", "nothing to do: the run rolls the parts back and reads it again")
        self.at.reopen()
        self.gtid, self.rows.changes, self.xa = "", [], False

    def caught_up(self, file: str, pos: int) -> None:
        """The stream ended at the log end; outside a group that end is a boundary too."""
        self.at.caught_up(file, pos)

    def _end(self, event) -> MysqlPosition:
        end = self.at.end(event.packet.log_pos, self.gtid)
        self.gtid, self.parted, self.xa = "", False, False
        return end

    def _commit(self, event, xid: int | None) -> list[Transaction | SchemaChange]:
        changes, self.rows.changes, parted = self.rows.changes, [], self.parted
        end = self._end(event)
        # After parts the end must come even with no change left: it is what commits them.
        return [Transaction(changes, end, float(event.timestamp), xid)] if changes or parted else []

    def _xid(self, event: XidEvent):
        return self._commit(event, event.xid)

    def _gtid(self, event) -> None:
        self.at.inside, self.gtid = True, event.gtid
        self.xa = flags_xa(event)

    def _rotate(self, event: RotateEvent) -> None:
        self.at.rotate(event.next_binlog, event.position)

    def _heartbeat(self, event: HeartbeatLogEvent) -> list:
        # Sent only when the server has nothing more to send: its log_pos is the log end.
        if event.packet.log_pos:
            self.at.caught_up(self.at.file, event.packet.log_pos)
        return []

    def _query(self, event: QueryEvent):
        statement = event.query.strip()
        if statement.upper() == "BEGIN":
            self.at.inside = True
            return None
        if _TRANSACTION_END.fullmatch(statement):
            return self._commit(event, None)
        if m := XA_OUTCOME.fullmatch(statement):
            return self._xa_outcome(event, m)
        if _TRANSACTION_CONTROL.match(statement):
            self.xa = self.xa or bool(XA_START.match(statement))
            return None
        default_db = event.schema.decode("utf-8", errors="replace")
        self.statements.check(statement, default_db, event.packet.log_pos)
        tables = ddl_tables(statement, default_db, self.schemas)
        position = self._end(event)
        kind, added, columns = classify(statement)
        renamed = renamed_tables(statement, default_db) if tables else {}
        return [SchemaChange(t, statement, position, kind, added, columns, renamed.get(t)) for t in tables]

    def _load_query(self, event: LoadQueryEvent) -> None:
        """A LOAD DATA logged as a statement, inside its group."""
        self.statements.check(event.query, event.schema.decode("utf-8", errors="replace"), event.packet.log_pos)

    def _xa_prepare(self, event: XAPrepareEvent) -> list:
        if event.one_phase:  # MySQL logs XA COMMIT ... ONE PHASE as a group ending in this event
            return self._commit(event, None)
        self.xas.hold(event, self.rows.changes)
        self.rows.changes = []
        self._end(event)
        return []

    def _payload(self, event: TransactionPayloadEvent):
        """A compressed transaction: its inner events, as if they had come one by one."""
        out = None
        for inner in events_of(event, self.at.file, self.where):
            if type(inner) in self._handlers:  # TABLE_MAP and the like did their work while being parsed
                items = self.feed(inner)
                out = items if out is None else out + (items or [])
        return out

    def _xa_outcome(self, event: QueryEvent, m: re.Match) -> list[Transaction]:
        end = self._end(event)
        changes = self.xas.decided(m, end)
        return [] if changes is None else [Transaction(changes, end, float(event.timestamp))]
