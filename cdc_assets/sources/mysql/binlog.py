"""MySQL/MariaDB binlog as a log reader: whole committed transactions of the captured tables, with values
normalised to what the snapshot reads, through pymysqlreplication.

Binlog facts this relies on (MySQL internals manual "Binary Log Events", MariaDB KB "Replication Protocol"):
- every event header carries `log_pos`, the offset just *after* the event in its file;
- a transaction ends with XID_EVENT (InnoDB) or QUERY_EVENT "COMMIT" (MyISAM/Aria): the offset after it is a
  transaction boundary, the only position handed out;
- MariaDB opens a group with its GTID event alone, MySQL with GTID + QUERY "BEGIN"; DDL is one QUERY event
  standing alone (implicit commit);
- ROTATE_EVENT names the next file; the server first sends a synthetic one (timestamp 0) naming where it starts.

We stream by file/offset with `is_mariadb=False` even on MariaDB: with `is_mariadb=True` and no GTID the
library ignores log_file/log_pos and replays from the first binlog (python-mysql-replication 1.0,
`BinLogStreamReader.__set_mariadb_settings`: COM_BINLOG_DUMP with offset 4 and an empty file name).
"""
from __future__ import annotations

import hashlib
import os
import re
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from datetime import datetime, timedelta
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.constants import NONE_SOURCE
from pymysqlreplication.event import (FormatDescriptionEvent, GtidEvent, HeartbeatLogEvent, MariadbGtidEvent, QueryEvent,
                                      RotateEvent, XAPrepareEvent, XidEvent)
from pymysqlreplication.row_event import (DeleteRowsEvent, PartialUpdateRowsEvent, RowsEvent, UpdateRowsEvent,
                                          WriteRowsEvent)

from cdc_assets.core import gtid_sets
from cdc_assets.core.events import Idle, Op, RowChange, SchemaChange, Transaction, TransactionPart
from cdc_assets.core.positions import MysqlPosition, is_before
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.dbapi.mysql_login import REPLICATION, MysqlLogin, refused
from cdc_assets.errors import (NETWORK_HINT, REPLAN_HINT, LoginError, PositionLost, SourceSetupError, UnreachableError,
                               scrub)
from cdc_assets.sources.mysql import stream_start
from cdc_assets.sources.mysql.json_text import json_text
from cdc_assets.sources.mysql.partial_json import JsonDiffError, resolve_partial_json
from cdc_assets.sources.mysql.stream_start import FIRST_EVENT_OFFSET, StreamStart
from cdc_assets.sources.mysql.transaction_payload import TransactionPayloadEvent

IDLE_AFTER = 1.0  # seconds without a yield before an Idle
HEARTBEAT_PERIOD = 0.5  # seconds: an idle server sends HEARTBEAT_LOG_EVENT this often on a blocking stream
READ_TIMEOUT = 30  # seconds of silence (no event, no heartbeat) before the connection counts as lost
SERVER_ID_MIN = 1000  # ids below are left to hand-configured replicas
SERVER_ID_SPAN = 2**31 - SERVER_ID_MIN

ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
ER_ACCESS_DENIED_LOGIN = 1045
ER_MISSING_PRIVILEGE = {1044, 1227}  # database access, REPLICATION SLAVE / BINLOG MONITOR
CLIENT_ERRORS = range(2000, 3000)  # CR_*: connection refused, unknown host, lost during connect ...
PURGED = "Could not find first log file name"

ROW_METADATA_HINT = ("set binlog_row_metadata=FULL in the server config (MariaDB >= 10.5, MySQL >= 8.0.14); "
                     "changes logged before that cannot be read by column name: " + REPLAN_HINT)

ROW_IMAGE_HINT = ("make every session log full row images (binlog_row_image=FULL in the server config, and no "
                  "SET SESSION binlog_row_image=MINIMAL/NOBLOB), then re-snapshot the tables: " + REPLAN_HINT)

PAYLOAD_HINT = ("set binlog_transaction_compression=OFF on the source (globally and in the writing sessions), "
                "then " + REPLAN_HINT)
PARTIAL_JSON_HINT = ("set binlog_row_value_options='' (the default) and binlog_row_image=FULL on the source (globally "
                     "and in the writing sessions), then " + REPLAN_HINT)

# TransactionPayloadEvent: MySQL's compressed transactions, whose inner events the reader takes in turn.
READER_EVENTS = [WriteRowsEvent, UpdateRowsEvent, PartialUpdateRowsEvent, DeleteRowsEvent, XidEvent, QueryEvent,
                 RotateEvent, GtidEvent, MariadbGtidEvent, HeartbeatLogEvent, XAPrepareEvent, TransactionPayloadEvent]
BOUNDARY_EVENTS = [XidEvent, QueryEvent, RotateEvent, GtidEvent, MariadbGtidEvent, XAPrepareEvent,
                   TransactionPayloadEvent]

Converter = Callable[[Any], Any]


def default_server_id(task_id: str) -> int:
    """A stable replica server_id for a task: every connected replica needs its own, or the server drops the
    older connection of two with the same id."""
    digest = hashlib.sha256(task_id.encode()).digest()
    return SERVER_ID_MIN + int.from_bytes(digest[:8], "big") % SERVER_ID_SPAN


# ---- values: what the library decodes -> what the snapshot reads -------------------------------------------

_ZERO_TIMESTAMP = datetime(1970, 1, 1)  # TIMESTAMP '0000-00-00 00:00:00' is stored as epoch 0
_ZERO_YEAR = 1900  # YEAR 0000 is stored as 0 and decoded as 1900 + 0; real years start at 1901


def _binary(fixed_length: int | None) -> Converter:
    def convert(value: Any) -> bytes:
        # An empty value of a binary-charset column is decoded to '' (the library "decodes" with
        # charset 'binary', which Python only skips for empty input).
        raw = value.encode() if isinstance(value, str) else value
        # The binlog strips trailing 0x00 from BINARY(n); the column returns them.
        return raw.ljust(fixed_length, b"\0") if fixed_length else raw
    return convert


def _set_text(members: tuple[str, ...]) -> Converter:
    # COLUMN_TYPE doubles quotes inside members; the binlog metadata carries them plain.
    order = [m.replace("''", "'") for m in members]

    def convert(value: set) -> str:
        text = [m for m in order if m in value]
        return ",".join(text + sorted(value.difference(order)))
    return convert


_SECOND = timedelta(seconds=1)


def _time2(value: timedelta) -> timedelta:
    """Undo the library's misreading of a negative TIME(n>0) with a fraction.

    TIME2 stores a negative value -(S + f) as integer part -(S + 1) and fraction 1 - f (sql-common/my_time.cc
    my_time_packed_from_binary); pymysqlreplication negates the two parts separately and returns -(S + 1 - f):
    -00:00:01.10 comes back as -00:00:01.90. Its magnitude M = S + (1 - f) with 0 < 1 - f < 1 gives
    S = floor(M) and f = 1 - frac(M). Whole negative values and positive ones are read right."""
    if value >= timedelta(0):
        return value
    magnitude = -value
    fraction = timedelta(microseconds=magnitude.microseconds)
    if not fraction:
        return value
    return -(magnitude - fraction + (_SECOND - fraction))


def _uuid_text(value: Any) -> str:
    raw = value.encode() if isinstance(value, str) else value  # trailing zero bytes stripped, as for BINARY
    return str(uuid.UUID(bytes=raw.ljust(16, b"\0")))


def _time_text(precision: int) -> Converter:
    """TIME as `CAST(col AS CHAR)` prints it ('838:59:59.000000', '-00:00:01.500000' for TIME(6)): a
    PostgreSQL interval parses that text to hours, where a timedelta would arrive as '34 days 22:59:59'."""
    def convert(value: timedelta) -> str:
        value = _time2(value) if precision else value
        micros = abs(value) // timedelta(microseconds=1)
        seconds, fraction = divmod(micros, 1_000_000)
        hours, rest = divmod(seconds, 3600)
        text = f"{'-' if value < timedelta(0) else ''}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
        return f"{text}.{fraction:06d}"[:len(text) + 1 + precision] if precision else text
    return convert


def converter(column: Column) -> Converter | None:
    """How a non-NULL binlog value of `column` becomes the snapshot's value; None when it already is."""
    kind = column.kind
    if kind == Kind.BIT:
        width = column.length or 1
        return lambda v: v.zfill(width)
    if kind == Kind.BINARY:
        return _binary(column.length if column.native.startswith("binary") else None)
    if kind == Kind.JSON:
        return json_text
    if kind == Kind.SET:
        return _set_text(column.values)
    if kind == Kind.TIMESTAMP:
        # Decoded as a naive datetime in UTC, like the snapshot's UTC session renders it.
        return lambda v: None if v == _ZERO_TIMESTAMP else v
    if kind == Kind.YEAR:
        return lambda v: 0 if v == _ZERO_YEAR else v
    if kind == Kind.UUID:
        return _uuid_text
    if kind == Kind.TIME:
        return _time_text(column.precision or 0)
    return None  # ints, DECIMAL, floats, strings, DATE/DATETIME (zero dates already None)


def converters(schema: TableSchema) -> dict[str, Converter]:
    return {c.name: conv for c in schema.columns if (conv := converter(c)) is not None}


def described(values: dict, names: Collection[str]) -> dict:
    """Only the columns in `names`, the described table's: a column the server logs that the task does not
    carry (a functional index's hidden column, one added since the schema was read, an excluded one) never
    reaches the target. Names come from binlog_row_metadata=FULL, so no value moves to another column."""
    return {name: value for name, value in values.items() if name in names}


def normalise_image(values: dict, none_sources: dict, convs: dict[str, Converter]) -> dict:
    """Normalise one row image in place and return it. Columns the image does not carry (a session's
    binlog_row_image MINIMAL or NOBLOB) are dropped: their values are unknown, not NULL."""
    for name, source in none_sources.items():
        if source == NONE_SOURCE.COLS_BITMAP:
            del values[name]
    for name, convert in convs.items():
        value = values.get(name)
        if value is not None:
            values[name] = convert(value)
        elif none_sources.get(name) == NONE_SOURCE.EMPTY_SET:
            values[name] = ""  # the library reports an empty SET as None
    return values


# ---- DDL: which captured tables a statement touches ---------------------------------------------------------

_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_NAME = rf"{_IDENT}(?:\s*\.\s*{_IDENT})?"
_NAME_PARTS = re.compile(rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?")
_NAME_LIST = rf"{_NAME}(?:\s*,\s*{_NAME})*"
_TABLE_DDL = [re.compile(p, re.I | re.S) for p in (
    rf"ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?(?P<names>{_NAME})",
    rf"CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<names>{_NAME})",
    rf"DROP\s+TABLES?\s+(?:IF\s+EXISTS\s+)?(?P<names>{_NAME_LIST})",
    rf"TRUNCATE\s+(?:TABLE\s+)?(?P<names>{_NAME})",
    rf"RENAME\s+TABLES?\s+(?P<names>{_NAME}\s+TO\s+{_NAME}(?:\s*,\s*{_NAME}\s+TO\s+{_NAME})*)",
)]
_DROP_DATABASE = re.compile(rf"DROP\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+EXISTS\s+)?(?P<db>{_IDENT})", re.I)
_LEADING_COMMENTS = re.compile(r"^(?:\s+|/\*.*?\*/)+", re.S)


def _unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def _named_tables(names: str, default_db: str) -> list[TableId]:
    found = []
    for m in _NAME_PARTS.finditer(names):
        if m.group(2) is None and m.group(1).upper() == "TO":
            continue  # RENAME's keyword; a table really named `to` must be quoted
        db, table = (m.group(1), m.group(2)) if m.group(2) else (default_db, m.group(1))
        found.append(TableId(_unquote(db), _unquote(table)))
    return found


def ddl_tables(statement: str, default_db: str, captured: Collection[TableId]) -> list[TableId]:
    """The captured tables a DDL statement creates, alters, renames, truncates or drops, in statement order.

    Unqualified names belong to `default_db` (the QUERY_EVENT's current database). Temporary tables,
    indexes and other objects are not tables we capture."""
    text = _LEADING_COMMENTS.sub("", statement)
    if m := _DROP_DATABASE.match(text):
        db = _unquote(m.group("db"))
        return sorted(t for t in captured if t.namespace == db)
    for pattern in _TABLE_DDL:
        if m := pattern.match(text):
            return [t for t in dict.fromkeys(_named_tables(m.group("names"), default_db)) if t in captured]
    return []


# ---- events -> transactions ---------------------------------------------------------------------------------

_TRANSACTION_CONTROL = re.compile(r"(?:SAVEPOINT|RELEASE\s+SAVEPOINT|ROLLBACK\s+(?:WORK\s+)?TO|XA)\b", re.I)
_TRANSACTION_END = re.compile(r"(?:COMMIT|ROLLBACK)(?:\s+WORK)?\s*;?", re.I)
# How the server logs the outcome of a prepared XA: its xid as gtrid, bqual in hex, then formatID.
FL_PREPARED_XA = 64  # MariaDB Gtid_log_event flags2: the group is an XA PREPARE's (log_event.h)
_XA_START = re.compile(r"XA\s+(?:START|BEGIN)\b", re.I)
_XA_OUTCOME = re.compile(r"XA\s+(?P<outcome>COMMIT|ROLLBACK)\s+X'(?P<gtrid>[0-9A-F]*)'\s*,\s*X'(?P<bqual>[0-9A-F]*)'"
                         r"\s*,\s*(?P<format>\d+)\s*;?", re.I)

XaId = tuple[bytes, bytes, int]  # gtrid, bqual, formatID
XaLookup = Callable[[XaId, MysqlPosition], list[RowChange]]


def _xa_id(event: XAPrepareEvent) -> XaId:
    return event.xid_gtrid, event.xid_bqual, event.xid_format_id


class _Assembler:
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
    """

    def __init__(self, start: MysqlPosition, schemas: dict[TableId, TableSchema], where: str,
                 lookup: XaLookup | None = None, part_events: int | None = None, server: str | None = None,
                 by_gtid: bool = False) -> None:
        self.boundary = start
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
        self._handlers = {
            WriteRowsEvent: self._insert, UpdateRowsEvent: self._update, PartialUpdateRowsEvent: self._update,
            DeleteRowsEvent: self._delete, XidEvent: self._xid, QueryEvent: self._query,
            RotateEvent: self._rotate, GtidEvent: self._gtid, MariadbGtidEvent: self._gtid,
            HeartbeatLogEvent: self._heartbeat, XAPrepareEvent: self._xa_prepare,
            TransactionPayloadEvent: self._payload,
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
        tables = ddl_tables(statement, default_db, self.schemas)
        position = self._end(event)
        return [SchemaChange(t, statement, position) for t in tables]

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
        if any(not c.name for c in event.columns):
            raise SourceSetupError(f"the binlog of {self.where} carries no column names for {table}", ROW_METADATA_HINT)
        self.inside = True
        # Inside its group: on another server's positions it compares by the set before the group.
        return table, schema, self._convs[table], MysqlPosition(self.file, event.packet.log_pos,
                                                               self.boundary.gtid_set, self.server)

    def _insert(self, event: WriteRowsEvent) -> None:
        if found := self._rows(event):
            table, schema, convs, pos = found
            for row in event.rows:
                after = normalise_image(described(row["values"], self._names[table]), row["none_sources"], convs)
                key = _key(schema, after)
                self._require_whole(table, row["none_sources"], pos, f"an insert of key {key}")
                self.changes.append(RowChange(table, Op.INSERT, key, after, None, pos))

    def _update(self, event: UpdateRowsEvent) -> None:
        if found := self._rows(event):
            table, schema, convs, pos = found
            names = self._names[table]
            for row in self._whole_json(event, table, pos):
                before = normalise_image(described(row["before_values"], names), row["before_none_sources"], convs)
                after = normalise_image(described(row["after_values"], names), row["after_none_sources"], convs)
                # MINIMAL leaves unchanged key columns out of the after image; the before image has the key.
                after = {**{k: before[k] for k in schema.primary_key if k not in after}, **after}
                key, old = _key(schema, after), _key(schema, before)
                if key != old:  # a partial row can update its key's row, not make one at another key
                    self._require_whole(table, row["after_none_sources"], pos, f"an update moving key {old} to {key}")
                self.changes.append(RowChange(table, Op.UPDATE, key, after, before, pos))

    def _delete(self, event: DeleteRowsEvent) -> None:
        if found := self._rows(event):
            table, schema, convs, pos = found
            for row in event.rows:
                before = normalise_image(described(row["values"], self._names[table]), row["none_sources"], convs)
                self.changes.append(RowChange(table, Op.DELETE, _key(schema, before), None, before, pos))

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
    return tuple(image[k] for k in schema.primary_key)


# ---- the stream -----------------------------------------------------------------------------------------------

def _open(url: DbUrl, server_id: int, start: MysqlPosition | StreamStart, events: list,
          tables: Collection[TableId], blocking: bool = False, mariadb: bool = False) -> BinLogStreamReader:
    """A non-blocking stream ends once caught up; a blocking one waits for more, and hands control back at
    each heartbeat so that the reader can yield Idle and notice close(). Waiting on heartbeats beats
    reopening a non-blocking stream in a loop: each open costs two connections (~0.16 s of CPU, most of it
    the TLS context PyMySQL builds per connection).

    By file/offset the library must be told MySQL even on MariaDB (it ignores the file otherwise); by GTID
    set it must be told the flavour: MariaDB takes the set as @slave_connect_state, MySQL in the dump packet."""
    begin = start if isinstance(start, StreamStart) else StreamStart(start)
    where = dict(auto_position=begin.auto_position, is_mariadb=mariadb) if begin.by_gtid else dict(
        log_file=begin.position.file, log_pos=begin.position.pos, resume_stream=True, is_mariadb=False)
    return BinLogStreamReader(
        connection_settings=replication_settings(url),
        server_id=server_id, blocking=blocking, slave_heartbeat=HEARTBEAT_PERIOD if blocking else None,
        only_events=events, only_schemas=sorted({t.namespace for t in tables}),
        only_tables=sorted({t.name for t in tables}), enable_logging=False, **where)


def replication_settings(url: DbUrl) -> dict:
    """pymysql.connect keywords of the replication connection (and of the library's control connection): the
    same TLS and RSA key exchange as every other connection to the server (dbapi/mysql_login.py)."""
    return {"host": url.host, "port": url.port, "user": url.user, "password": url.password,
            "connect_timeout": 10, "read_timeout": READ_TIMEOUT, **MysqlLogin.from_url(url).pymysql_args()}


def _fetch(stream: BinLogStreamReader, url: DbUrl, start: MysqlPosition | StreamStart):
    try:
        return stream.fetchone()
    except pymysql.err.MySQLError as exc:
        raise _translate(exc, url, start) from None


def _translate(exc: pymysql.err.MySQLError, url: DbUrl, start: MysqlPosition | StreamStart) -> Exception:
    code = exc.args[0] if exc.args else None
    reason = scrub(str(exc.args[1] if len(exc.args) > 1 else exc), url.password)
    if isinstance(start, StreamStart):
        if code == ER_MASTER_FATAL_ERROR_READING_BINLOG and start.by_gtid:
            return PositionLost(f"cannot resume the binlog of {url} at {start.position}: its file/offset belong to "
                                f"another server or are gone, and the server cannot start from GTID set "
                                f"{start.auto_position}: {reason}", REPLAN_HINT)
        start = start.position
    if code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
        if PURGED in reason:
            return PositionLost(f"the binlog from {start} was purged from {url} (or never existed)", REPLAN_HINT)
        return PositionLost(f"cannot read the binlog of {url} from {start}: {reason}", REPLAN_HINT)
    if code == ER_ACCESS_DENIED_LOGIN or (isinstance(code, str) and ("auth" in code or "sha2" in code)):
        return refused(REPLICATION, url, reason)  # PyMySQL words its own auth failures without a code
    if code in ER_MISSING_PRIVILEGE:
        return SourceSetupError(f"user '{url.user}' may not read the binlog of {url}: {reason}",
                                "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* to that user")
    if code in CLIENT_ERRORS:  # TLS refused, or no answer
        failure = refused(REPLICATION, url, reason)
        return failure if isinstance(failure, LoginError) else UnreachableError(
            f"cannot reach the binlog of {url} over {REPLICATION}: {reason}", NETWORK_HINT)
    return exc


class BinlogReader:
    """Reads committed transactions of the captured tables from a MySQL/MariaDB binlog (a `LogReader`).

    `server_id` must differ from every other replica of the server: see `default_server_id`.
    Positions are file/offset pairs; `gtid_set` carries the GTID of the transaction that ends there, when seen
    (one GTID, not the server's executed set).

    Values are what the snapshot reads (see `converter`): BIT as a padded bit string, binary kinds as bytes,
    JSON as text, SET as members in declared order, zero dates as None, DECIMAL as Decimal, TIME as its text,
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
        lookup = _PreparedBefore(self.url, default_server_id(f"{self.server_id}#xa"), self.schemas, start,
                                 state.identity)
        begin = stream_start.choose(start, state, self.url)
        asm = _Assembler(start, self.schemas, str(self.url), lookup, part_events, state.identity, begin.by_gtid)
        reported, last_yield = start, time.monotonic()
        blocking = stop_at is None  # a bounded read drains the log first, then waits only if it must
        while not self._closed:
            asm.restart()
            opened_at = asm.boundary
            if opened_at != begin.position:  # reopened past the first group: this server's file/offset
                begin = StreamStart(opened_at)
            stream = _open(self.url, self.server_id, begin, READER_EVENTS, self.schemas, blocking,
                           state.flavour.mariadb)
            try:
                while not self._closed and (event := _fetch(stream, self.url, begin)) is not None:
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


class _PreparedBefore:
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
        firsts = [MysqlPosition(f, FIRST_EVENT_OFFSET) for f in _binary_logs(self.url)]
        for first in reversed([f for f in firsts if not is_before(self.start, f)]):
            if self._scanned_from is not None and not is_before(first, self._scanned_from):
                continue
            self._pending, self._scanned_from = self._pending_at_start(first), first
            if xid in self._pending:
                return self._pending[xid]
        raise PositionLost(f"the XA transaction X'{gtrid.hex()}',X'{bqual.hex()}',{format_id} committed at {commit} "
                           f"in the binlog of {self.url} was prepared before {self.start}, in a binlog that is no "
                           "longer there: its changes cannot be read", REPLAN_HINT)

    def _pending_at_start(self, first: MysqlPosition) -> dict[XaId, list[RowChange]]:
        asm = _Assembler(first, self.schemas, str(self.url))
        stream = _open(self.url, self.server_id, first, READER_EVENTS, self.schemas)
        try:
            while is_before(asm.boundary, self.start) and (event := _fetch(stream, self.url, first)) is not None:
                asm.feed(event)
        finally:
            stream.close()
        return asm.prepared


# ---- startup_mode=timestamp ---------------------------------------------------------------------------------

def find_position_at(url: DbUrl, timestamp: float, server_id: int | None = None) -> MysqlPosition:
    """The boundary just before the first group (transaction or DDL) logged at or after `timestamp`.

    Binlog timestamps are whole seconds, so groups in the second of `timestamp` count as after it: starting
    a little early only replays changes. Files are binary-searched by creation time (their
    FORMAT_DESCRIPTION_EVENT): every group of earlier files was logged before a file was created. Before the
    oldest retained file the search starts at its beginning, like Flink CDC's timestamp startup."""
    server_id = server_id or default_server_id(f"{url}#find_position_at#{os.getpid()}")
    since = int(timestamp)
    files = _binary_logs(url)
    lo, hi = 0, len(files) - 1
    while lo < hi:  # the last file created before `since`
        mid = (lo + hi + 1) // 2
        if _file_created(url, server_id, files[mid]) < since:
            lo = mid
        else:
            hi = mid - 1
    found = _first_boundary_since(url, server_id, MysqlPosition(files[lo], FIRST_EVENT_OFFSET), since)
    conn = connect(url, database="")
    try:  # compared with positions of other servers later on: it names its server and GTID set
        return stream_start.resolved(found, stream_start.read_state(conn), conn)
    finally:
        conn.close()


def _binary_logs(url: DbUrl) -> list[str]:
    conn = connect(url, database="")
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            files = [row[0] for row in cur.fetchall()]
    finally:
        conn.close()
    if not files:
        raise SourceSetupError(f"SHOW BINARY LOGS lists no file on {url}", "start the server with --log-bin")
    return files


def _file_created(url: DbUrl, server_id: int, file: str) -> int:
    start = MysqlPosition(file, FIRST_EVENT_OFFSET)
    stream = _open(url, server_id, start, [FormatDescriptionEvent], ())
    try:
        event = _fetch(stream, url, start)
    finally:
        stream.close()
    if event is None:
        raise PositionLost(f"the binlog {file} on {url} has no format description event", REPLAN_HINT)
    return event.timestamp


def _first_boundary_since(url: DbUrl, server_id: int, start: MysqlPosition, since: int) -> MysqlPosition:
    asm = _Assembler(start, {}, str(url))
    stream = _open(url, server_id, start, BOUNDARY_EVENTS, ())
    try:
        while (event := _fetch(stream, url, start)) is not None:
            before = asm.boundary
            if asm.feed(event) is not None and event.timestamp >= since:
                return before
        asm.caught_up(stream.log_file, stream.log_pos)
        return asm.boundary
    finally:
        stream.close()
