"""Binlog events -> transactions: groups, boundaries with their GTID sets, XA PREPARE/COMMIT, parts of big
transactions and schema changes of captured tables (see `Assembler`)."""
from __future__ import annotations

import re
from collections.abc import Callable

from pymysqlreplication.constants import NONE_SOURCE
from pymysqlreplication.event import (GtidEvent, HeartbeatLogEvent, MariadbGtidEvent, QueryEvent, RotateEvent,
                                      XAPrepareEvent, XidEvent)
from pymysqlreplication.row_event import (DeleteRowsEvent, PartialUpdateRowsEvent, RowsEvent, UpdateRowsEvent,
                                          WriteRowsEvent)

from cdc_assets.core import gtid_sets
from cdc_assets.core.events import Op, RowChange, SchemaChange, Transaction, TransactionPart
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.errors import REPLAN_HINT, SourceSetupError, UnreachableError
from cdc_assets.sources.mysql.charsets import undecodable
from cdc_assets.sources.mysql.ddl import classify, ddl_tables
from cdc_assets.sources.mysql.load_query import LoadQueryEvent
from cdc_assets.sources.mysql.logged_statements import dml_tables, logged_as_statement, statement_verb
from cdc_assets.sources.mysql.partial_json import JsonDiffError, resolve_partial_json
from cdc_assets.sources.mysql.row_decoder import RowDecoders
from cdc_assets.sources.mysql.table_map import adopt
from cdc_assets.sources.mysql.transaction_payload import TransactionPayloadEvent
from cdc_assets.sources.mysql.values import converters, described, normalise_image
from cdc_assets.sources.mysql.zero_dates import ZeroDates

ROW_METADATA_HINT = ("set binlog_row_metadata=FULL in the server config (MariaDB >= 10.5, MySQL >= 8.0.14); "
                     "changes logged before that cannot be read by column name: " + REPLAN_HINT)

ROW_IMAGE_HINT = ("make every session log full row images (binlog_row_image=FULL in the server config, and no "
                  "SET SESSION binlog_row_image=MINIMAL/NOBLOB), then re-snapshot the tables: " + REPLAN_HINT)

PAYLOAD_HINT = ("set binlog_transaction_compression=OFF on the source (globally and in the writing sessions), "
                "then " + REPLAN_HINT)
PARTIAL_JSON_HINT = ("set binlog_row_value_options='' (the default) and binlog_row_image=FULL on the source (globally "
                     "and in the writing sessions), then " + REPLAN_HINT)

_TRANSACTION_CONTROL = re.compile(r"(?:SAVEPOINT|RELEASE\s+SAVEPOINT|ROLLBACK\s+(?:WORK\s+)?TO|XA)\b", re.I)
_TRANSACTION_END = re.compile(r"(?:COMMIT|ROLLBACK)(?:\s+WORK)?\s*;?", re.I)
FL_PREPARED_XA = 64  # MariaDB Gtid_log_event flags2: the group is an XA PREPARE's (log_event.h)
_XA_START = re.compile(r"XA\s+(?:START|BEGIN)\b", re.I)
# How the server logs the outcome of a prepared XA: its xid as gtrid, bqual in hex, then formatID.
_XA_OUTCOME = re.compile(r"XA\s+(?P<outcome>COMMIT|ROLLBACK)\s+X'(?P<gtrid>[0-9A-F]*)'\s*,\s*X'(?P<bqual>[0-9A-F]*)'"
                         r"\s*,\s*(?P<format>\d+)\s*;?", re.I)

XaId = tuple[bytes, bytes, int]  # gtrid, bqual, formatID
XaLookup = Callable[[XaId, MysqlPosition], list[RowChange]]


_WHOLE: dict = {}  # the none_sources of a whole row image: no column missing (never written to)


def _xa_id(event: XAPrepareEvent) -> XaId:
    return event.xid_gtrid, event.xid_bqual, event.xid_format_id


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

    An XA prepared before `start` and committed after it is not held: `lookup` finds its changes further back
    in the log (without one, such a commit is taken as the end of a group of nothing captured).

    Each boundary's GTID set is the previous boundary's plus the GTID of the group ending there (MariaDB: the
    group's domain moves to its d-s-n; MySQL: uuid:gno joins the intervals), so it is exact when `start`'s set
    is. Boundaries carry `server`, the identity of the server streaming. `by_gtid`: the stream opened at
    `start`'s GTID set on a server where its file/offset mean nothing, so no boundary is taken from a ROTATE or
    the log end before the first group ended (from then on they are this server's).

    A DML statement on a captured table (binlog_format STATEMENT/MIXED) raises before its group ends, so no
    checkpoint passes it (sources/mysql/logged_statements.py); `statements_stop=False` for reads of the log
    before the task's start, whose statements were the reader's to stop at.
    """

    def __init__(self, start: MysqlPosition, schemas: dict[TableId, TableSchema], where: str,
                 lookup: XaLookup | None = None, part_events: int | None = None, server: str | None = None,
                 by_gtid: bool = False, statements_stop: bool = True) -> None:
        self.boundary = start
        self.statements_stop = statements_stop
        self.server = start.server if server is None else server
        self.positioned = not by_gtid
        self.prepared: dict[XaId, list[RowChange]] = {}  # prepared XAs seen since `start`, not yet committed
        self._lookup = lookup
        self.schemas = schemas
        self.where = where
        self.part_events = part_events
        self.file = start.file
        self.inside = False
        self.gtid = ""
        self.changes: list[RowChange] = []
        self.parted = False  # parts of the current group were handed out
        self.xa = False  # the current group is an XA transaction's: held whole until its outcome
        self._convs = {table: converters(schema) for table, schema in schemas.items()}
        self._names = {table: frozenset(c.name for c in schema.columns) for table, schema in schemas.items()}
        self._decoders = RowDecoders(self._names, self._convs)
        self._adopted: dict[TableId, list] = {}  # table -> the last TABLE_MAP's columns, adopted (table_map.py)
        self._zero_dates = {table: ZeroDates(schema) for table, schema in schemas.items()}
        self._handlers = {
            WriteRowsEvent: self._insert, UpdateRowsEvent: self._update, PartialUpdateRowsEvent: self._update,
            DeleteRowsEvent: self._delete, XidEvent: self._xid, QueryEvent: self._query,
            RotateEvent: self._rotate, GtidEvent: self._gtid, MariadbGtidEvent: self._gtid,
            HeartbeatLogEvent: self._heartbeat, XAPrepareEvent: self._xa_prepare,
            TransactionPayloadEvent: self._payload, LoadQueryEvent: self._load_query,
        }

    def feed(self, event) -> list[Transaction | TransactionPart | SchemaChange] | None:
        items = self._handlers[type(event)](event)
        if items is None and self.part_events and not self.xa and len(self.changes) >= self.part_events:
            return self._parts()
        return items

    def _parts(self) -> list[TransactionPart]:
        # A row event's position lies inside its group, so strictly before the group's end.
        n = self.part_events
        parts = [TransactionPart(self.changes[i:i + n], self.changes[i + n - 1].position)
                 for i in range(0, len(self.changes) - n + 1, n)]
        self.changes, self.parted = self.changes[len(parts) * n:], True
        return parts

    def restart(self) -> None:
        """Forget a partial group: the stream reopens at the boundary."""
        if self.parted:  # re-reading the group would hand its first parts out twice
            raise UnreachableError(f"the binlog stream of {self.where} ended inside a transaction handed out in "
                                   "parts", "nothing to do: the run rolls the parts back and reads it again")
        self.file, self.inside, self.gtid, self.changes, self.xa = self.boundary.file, False, "", [], False

    def caught_up(self, file: str, pos: int) -> None:
        """The stream ended at the log end; outside a group that end is a boundary too."""
        if not self.inside and self.positioned:
            self.boundary = MysqlPosition(file, pos, self.boundary.gtid_set, self.server)

    def _end(self, event) -> MysqlPosition:
        executed = gtid_sets.add(self.boundary.gtid_set, self.gtid) if self.gtid else self.boundary.gtid_set
        self.boundary = MysqlPosition(self.file, event.packet.log_pos, executed, self.server)
        self.inside, self.gtid, self.parted, self.xa, self.positioned = False, "", False, False, True
        return self.boundary

    def _commit(self, event, xid: int | None) -> list[Transaction | SchemaChange]:
        changes, self.changes, parted = self.changes, [], self.parted
        end = self._end(event)
        # After parts the end must come even with no change left: it is what commits them.
        return [Transaction(changes, end, float(event.timestamp), xid)] if changes or parted else []

    def _xid(self, event: XidEvent):
        return self._commit(event, event.xid)

    def _gtid(self, event) -> None:
        self.inside, self.gtid = True, event.gtid
        # MariaDB flags an XA PREPARE's group in its GTID event; MySQL logs "XA START" inside it (see _query).
        self.xa = isinstance(event, MariadbGtidEvent) and bool(event.flags & FL_PREPARED_XA)

    def _rotate(self, event: RotateEvent) -> None:
        self.file = event.next_binlog
        if not self.inside and self.positioned:
            self.boundary = MysqlPosition(self.file, event.position, self.boundary.gtid_set, self.server)

    def _heartbeat(self, event: HeartbeatLogEvent) -> list:
        # Sent only when the server has nothing more to send: its log_pos is the log end.
        if event.packet.log_pos:
            self.caught_up(self.file, event.packet.log_pos)
        return []

    def _query(self, event: QueryEvent):
        statement = event.query.strip()
        if statement.upper() == "BEGIN":
            self.inside = True
            return None
        if _TRANSACTION_END.fullmatch(statement):
            return self._commit(event, None)
        if m := _XA_OUTCOME.fullmatch(statement):
            return self._xa_outcome(event, m)
        if _TRANSACTION_CONTROL.match(statement):
            self.xa = self.xa or bool(_XA_START.match(statement))
            return None
        default_db = event.schema.decode("utf-8", errors="replace")
        self._refuse_statement(event, statement, default_db)
        tables = ddl_tables(statement, default_db, self.schemas)
        position = self._end(event)
        kind, added, columns = classify(statement)
        return [SchemaChange(t, statement, position, kind, added, columns) for t in tables]

    def _refuse_statement(self, event, statement: str, default_db: str) -> None:
        if self.statements_stop and (written := dml_tables(statement, default_db, self.schemas)):
            raise logged_as_statement(written, statement_verb(statement), MysqlPosition(
                self.file, event.packet.log_pos, self.boundary.gtid_set, self.server), self.where)

    def _load_query(self, event: LoadQueryEvent) -> None:
        """A LOAD DATA logged as a statement, inside its group."""
        self._refuse_statement(event, event.query, event.schema.decode("utf-8", errors="replace"))

    def _xa_prepare(self, event: XAPrepareEvent) -> list:
        if event.one_phase:  # MySQL logs XA COMMIT ... ONE PHASE as a group ending in this event
            return self._commit(event, None)
        self.prepared[_xa_id(event)], self.changes = self.changes, []
        self._end(event)
        return []

    def _payload(self, event: TransactionPayloadEvent):
        """A compressed transaction: its inner events, as if they had come one by one."""
        if event.failure is not None:
            end = MysqlPosition(self.file, event.log_pos)
            raise SourceSetupError(f"cannot read the compressed transaction (TRANSACTION_PAYLOAD_EVENT) ending at "
                                   f"{end} in the binlog of {self.where}: {event.failure}", PAYLOAD_HINT)
        out = None
        for inner in event.events:
            if type(inner) in self._handlers:  # TABLE_MAP and the like did their work while being parsed
                items = self.feed(inner)
                out = items if out is None else out + (items or [])
        return out

    def _xa_outcome(self, event: QueryEvent, m: re.Match) -> list[Transaction]:
        xid = bytes.fromhex(m["gtrid"]), bytes.fromhex(m["bqual"]), int(m["format"])
        changes = self.prepared.pop(xid, None)
        end = self._end(event)
        if m["outcome"].upper() == "ROLLBACK":
            return []
        if changes is None:
            changes = self._lookup(xid, end) if self._lookup is not None else []
        return [Transaction(changes, end, float(event.timestamp))]

    def _rows(self, event: RowsEvent) -> tuple[TableId, TableSchema, dict, MysqlPosition] | None:
        table = TableId(event.schema, event.table)
        schema = self.schemas.get(table)
        if schema is None:
            return None  # only_schemas x only_tables lets through more than the captured pairs
        columns = event.columns
        if self._adopted.get(table) is not columns:  # a new TABLE_MAP: once per transaction, not per event
            if any(not c.name for c in columns):
                raise SourceSetupError(f"the binlog of {self.where} carries no column names for {table}",
                                       ROW_METADATA_HINT)
            adopt(columns, schema)
            self._adopted[table] = columns
        self.inside = True
        # Inside its group: on another server's positions it compares by the set before the group.
        return table, schema, self._convs[table], MysqlPosition(self.file, event.packet.log_pos,
                                                               self.boundary.gtid_set, self.server)

    def _insert(self, event: WriteRowsEvent) -> None:
        if found := self._rows(event):
            table, schema, convs, pos = found
            zero_dates = self._zero_dates[table]
            for after, nones in self._images(event, table, convs, pos):
                key = _key(schema, after)
                if nones:
                    self._require_whole(table, nones, pos, f"an insert of key {key}")
                zero_dates.check(after, key, pos, self.where)
                self.changes.append(RowChange(table, Op.INSERT, key, after, None, pos))

    def _update(self, event: UpdateRowsEvent) -> None:
        if found := self._rows(event):
            table, schema, convs, pos = found
            zero_dates = self._zero_dates[table]
            for before, after, after_nones in self._pairs(event, table, convs, pos):
                # MINIMAL leaves unchanged key columns out of the after image; the before image has the key.
                if after_nones and any(k not in after for k in schema.primary_key):
                    after = {**{k: before[k] for k in schema.primary_key if k not in after}, **after}
                key, old = _key(schema, after), _key(schema, before)
                if key != old and after_nones:  # a partial row can update its key's row, not make one at another key
                    self._require_whole(table, after_nones, pos, f"an update moving key {old} to {key}")
                zero_dates.check(before, old, pos, self.where, before=True)
                zero_dates.check(after, key, pos, self.where)
                self.changes.append(RowChange(table, Op.UPDATE, key, after, before, pos))

    def _delete(self, event: DeleteRowsEvent) -> None:
        if found := self._rows(event):
            table, schema, convs, pos = found
            zero_dates = self._zero_dates[table]
            for before, _ in self._images(event, table, convs, pos):
                key = _key(schema, before)
                zero_dates.check(before, key, pos, self.where, before=True)
                self.changes.append(RowChange(table, Op.DELETE, key, None, before, pos))

    def _images(self, event: WriteRowsEvent | DeleteRowsEvent, table: TableId, convs: dict, pos: MysqlPosition
                ) -> list[tuple[dict, dict]]:
        """The event's row images normalised, each with the library's none_sources (empty: the image is whole)."""
        try:
            fast = self._decoders.rows(event, table)
            if fast is not None:
                return [(image, _WHOLE) for image in fast]
            names = self._names[table]
            return [(normalise_image(described(row["values"], names), row["none_sources"], convs),
                     row["none_sources"]) for row in event.rows]
        except UnicodeDecodeError as exc:
            raise undecodable(self.schemas[table], exc, pos, self.where) from None

    def _pairs(self, event: UpdateRowsEvent, table: TableId, convs: dict, pos: MysqlPosition
               ) -> list[tuple[dict, dict, dict]]:
        """(before, after, after's none_sources) per row of an update, normalised."""
        try:
            fast = self._decoders.pairs(event, table)
            if fast is not None:
                return [(before, after, _WHOLE) for before, after in fast]
            names = self._names[table]
            return [(normalise_image(described(row["before_values"], names), row["before_none_sources"], convs),
                     normalise_image(described(row["after_values"], names), row["after_none_sources"], convs),
                     row["after_none_sources"]) for row in self._whole_json(event, table, pos)]
        except UnicodeDecodeError as exc:
            raise undecodable(self.schemas[table], exc, pos, self.where) from None

    def _whole_json(self, event: UpdateRowsEvent, table: TableId, pos: MysqlPosition) -> list[dict]:
        """The event's rows, with each partial JSON value (binlog_row_value_options=PARTIAL_JSON) rebuilt from
        the before image into the whole document."""
        try:
            rows = event.rows
            for row in rows:
                resolve_partial_json(row["before_values"], row["after_values"])
        except JsonDiffError as exc:
            raise SourceSetupError(f"a partial JSON update of {table} at {pos} in the binlog of {self.where} cannot "
                                   f"be applied: {exc}", PARTIAL_JSON_HINT) from None
        return rows

    def _require_whole(self, table: TableId, none_sources: dict, pos: MysqlPosition, what: str) -> None:
        missing = [name for name, source in none_sources.items() if source == NONE_SOURCE.COLS_BITMAP]
        if missing:
            raise SourceSetupError(
                f"{what} in {table} at {pos} in the binlog of {self.where} lacks columns {missing}: the writing "
                "session logged a partial row image (binlog_row_image MINIMAL or NOBLOB), and their values are "
                "only in the source", ROW_IMAGE_HINT)


def _key(schema: TableSchema, image: dict) -> tuple:
    key = schema.primary_key
    return (image[key[0]],) if len(key) == 1 else tuple([image[k] for k in key])
