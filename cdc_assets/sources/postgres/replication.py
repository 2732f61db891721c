"""PostgreSQL logical replication with the built-in `pgoutput` plugin (protocol v1): publication and slot
administration, and `PgLogReader`, the log reader over psycopg2's LogicalReplicationConnection.

Facts this relies on (PostgreSQL 15 "Logical Decoding", "Streaming Replication Protocol"):
- pgoutput sends a transaction whole, once it committed: Begin, Relation (before the first change of a
  relation in a session and after its definition changed), Insert/Update/Delete/Truncate, Commit;
  transactions without published changes are not sent at all (PG >= 15);
- Commit's end LSN is the resume point; the server starts at max(requested LSN, slot's confirmed_flush_lsn)
  and skips every transaction whose commit record starts before it;
- XLogData's walEnd is the message's own LSN (0 for Relation), a keepalive's walEnd is how far decoding got:
  everything committed before it was already sent;
- the slot keeps WAL from its restart_lsn until the client reports a later flush position.
"""
from __future__ import annotations

import hashlib
import re
import select
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.errors
import psycopg2.extensions as ext
from psycopg2.extras import LogicalReplicationConnection

from cdc_assets.core.events import Idle, Op, RowChange, SchemaChange, Transaction, TransactionPart
from cdc_assets.core.positions import PgPosition
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect, qualified, quote_ident
from cdc_assets.errors import (NETWORK_HINT, REPLAN_HINT, PositionLost, SourceSetupError, TableError,
                               UnreachableError, scrub)
from cdc_assets.sources.postgres import pgoutput
from cdc_assets.sources.postgres.catalog import Catalog
from cdc_assets.sources.postgres.drift import Shape, describe_drift, recorded_shape, relation_shape
from cdc_assets.sources.postgres.feedback import Feedback
from cdc_assets.sources.postgres.partitions import partitions_of

IDLE_AFTER = 1.0  # seconds without a yield before an Idle
POLL_INTERVAL = 0.2  # seconds select() waits for the replication socket
STATUS_INTERVAL = 5  # seconds between psycopg2's automatic status updates; servers drop silent clients after
#                      wal_sender_timeout (60 s by default)
RELEASE_TIMEOUT = 5.0  # seconds a closed walsender may take to release its slot
MAX_IDENTIFIER = 63  # NAMEDATALEN - 1: longer names are truncated by the server (slot names are refused)
SESSION_OPTIONS = "-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=postgres"

LOST = "lost"  # pg_replication_slots.wal_status of an invalidated slot: its WAL was removed, it decodes nothing

# ---- names ---------------------------------------------------------------------------------------------------

_PLAIN_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")


def _identifier(task_id: str) -> str:
    """`cdc_assets_<task_id>` when that is a plain lowercase identifier (what slot names allow), else a cleaned,
    shortened form with a hash of the task id so that 'a-b' and 'a_b' still get different names."""
    name = f"cdc_assets_{task_id}"
    if _PLAIN_IDENTIFIER.match(name) and len(name) <= MAX_IDENTIFIER:
        return name
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:8]
    return re.sub(r"[^a-z0-9_]", "_", name.lower())[:MAX_IDENTIFIER - 9] + "_" + digest


def publication_name(task_id: str) -> str:
    return _identifier(task_id)


def slot_name(task_id: str) -> str:
    return _identifier(task_id)


# ---- publication and slot administration (on an autocommit connection) ---------------------------------------

def ensure_publication(conn, name: str, tables: list[TableId]) -> None:
    """Make publication `name` publish exactly `tables`: create it, or set its table list if it exists.

    A partitioned table's rows live in its leaf partitions, and by default the server publishes each change under
    the leaf's name; `publish_via_partition_root` publishes it under the partitioned table named here instead,
    including partitions created or attached later."""
    listed = ", ".join(qualified("postgres", t.namespace, t.name) for t in tables)
    publication = quote_ident("postgres", name)
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(f"CREATE PUBLICATION {publication} FOR TABLE {listed} WITH (publish_via_partition_root)")
            except psycopg2.errors.DuplicateObject:
                cur.execute(f"ALTER PUBLICATION {publication} SET TABLE {listed}")
                cur.execute(f"ALTER PUBLICATION {publication} SET (publish_via_partition_root)")
    except psycopg2.errors.UndefinedTable as exc:
        raise TableError(f"cannot publish {listed}: {_first_line(exc)}",
                         "create the table, or remove it from source.tables") from None
    except psycopg2.errors.InsufficientPrivilege as exc:
        raise SourceSetupError(f"cannot create or alter publication {name}: {_first_line(exc)}",
                               "run as the owner of the tables (or a superuser), with CREATE on the database") from None


def drop_publication(conn, name: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"DROP PUBLICATION IF EXISTS {quote_ident('postgres', name)}")


def ensure_slot(conn, slot: str, recreate: bool = False) -> PgPosition:
    """Create logical slot `slot` for pgoutput unless it exists; its confirmed position either way (for a new
    slot: its consistent point, from which every later commit is decoded). With `recreate`, an existing slot is
    dropped first: a re-plan starts over, and an invalidated slot can only be replaced. Raises PositionLost for
    an invalidated slot otherwise."""
    if (state := slot_state(conn, slot)) is not None and recreate:
        drop_slot(conn, slot)
    elif state is not None:
        _check_slot(conn, slot, state)
        return state.confirmed_flush_lsn
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
            return PgPosition.parse_lsn(cur.fetchone()[0])
    except psycopg2.errors.DuplicateObject:  # created meanwhile by a concurrent run
        return ensure_slot(conn, slot)
    except (psycopg2.errors.ObjectNotInPrerequisiteState, psycopg2.errors.ConfigurationLimitExceeded,
            psycopg2.errors.InsufficientPrivilege) as exc:
        raise SourceSetupError(
            f"cannot create replication slot {slot}: {_first_line(exc)}",
            "logical slots need wal_level = logical, a free slot under max_replication_slots (drop unused ones) "
            "and a user with the REPLICATION attribute") from None


def _check_slot(conn, slot: str, state: SlotState) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT current_database()")
        here = cur.fetchone()[0]
    if state.wal_status == LOST:
        raise PositionLost(
            f"replication slot {slot} in database '{state.database}' was invalidated: it held back more WAL than "
            f"max_slot_wal_keep_size allows, and the changes after its position {state.confirmed_flush_lsn} are gone",
            REPLAN_HINT)
    if state.plugin != "pgoutput" or state.database != here:
        raise SourceSetupError(
            f"replication slot {slot} exists but decodes with '{state.plugin}' in database '{state.database}', "
            f"not 'pgoutput' in '{here}'", f"drop it (SELECT pg_drop_replication_slot('{slot}')), then {REPLAN_HINT}")


def drop_slot(conn, slot: str) -> None:
    """Drop `slot` if it exists, once no reader holds it."""
    try:
        _once_released(conn, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                             "WHERE slot_name = %s", (slot,))
    except psycopg2.errors.ObjectInUse as exc:
        raise SourceSetupError(f"cannot drop replication slot {slot}: {_first_line(exc)}",
                               "stop the task's incremental run first") from None


def _once_released(conn, sql: str, params: tuple) -> None:
    """Run a statement that needs the slot, waiting a little for a walsender that is letting go of it: a
    closed replication connection's server process exits shortly after, not at once."""
    deadline = time.monotonic() + RELEASE_TIMEOUT
    while True:
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
            return
        except psycopg2.errors.ObjectInUse:
            if time.monotonic() > deadline:
                raise
            time.sleep(POLL_INTERVAL)


@dataclass(frozen=True)
class SlotState:
    """A slot as pg_replication_slots shows it, with the WAL it holds back (for lag and retention reports)."""

    slot: str
    plugin: str
    database: str
    active: bool
    restart_lsn: PgPosition | None  # the oldest WAL the slot keeps
    confirmed_flush_lsn: PgPosition | None  # the position acknowledged by the reader
    wal_status: str | None  # reserved / extended / unreserved / lost (lost: the slot is unusable)
    retained_bytes: int | None  # WAL kept for the slot: current WAL position - restart_lsn
    lag_bytes: int | None  # current WAL position - confirmed_flush_lsn


_SLOT_SQL = """
SELECT plugin, database, active, restart_lsn::text, confirmed_flush_lsn::text, wal_status,
       pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint,
       pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint
FROM pg_replication_slots WHERE slot_name = %s"""


def slot_state(conn, slot: str) -> SlotState | None:
    """The state of `slot`, or None when it does not exist."""
    with conn.cursor() as cur:
        cur.execute(_SLOT_SQL, (slot,))
        row = cur.fetchone()
    if row is None:
        return None
    plugin, database, active, restart, confirmed, wal_status, retained, lag = row
    lsn = lambda text: None if text is None else PgPosition.parse_lsn(text)  # noqa: E731
    return SlotState(slot, plugin, database, active, lsn(restart), lsn(confirmed), wal_status, retained, lag)


def _advance_slot(url: DbUrl, slot: str, position: PgPosition) -> None:
    """Move the slot's confirmed position forward by SQL (never back: the server refuses that)."""
    conn = connect(url)
    try:
        _once_released(conn, "SELECT pg_replication_slot_advance(slot_name, %s::pg_lsn) FROM pg_replication_slots "
                             "WHERE slot_name = %s AND confirmed_flush_lsn < %s::pg_lsn",
                       (str(position), slot, str(position)))
    finally:
        conn.close()


# ---- values: pgoutput text -> Python -------------------------------------------------------------------------

Caster = Callable[[str, Any], Any]  # (text, cursor) -> value, as psycopg2 typecasters are called


def _text(value: str, cursor) -> str:
    return value


def _single(value: float) -> float:
    """The float4 value itself, as `real::float8` reads it in the snapshot (the text is its shortest form)."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _then(cast: Caster, convert: Callable[[Any], Any]) -> Caster:
    """`cast`, then `convert` on every non-NULL element (arrays come as nested lists)."""
    def apply(value: Any) -> Any:
        if isinstance(value, list):
            return [apply(v) for v in value]
        return None if value is None else convert(value)
    return lambda value, cursor: apply(cast(value, cursor))


def _keeping(oid: int, array_oid: int, cast: Caster, kept: Callable[[str], bool]) -> dict[int, Caster]:
    """`cast` for a type and its arrays, except for the texts no Python value holds, which stay the server's
    text (the sink's cast and a MySQL target parse them as the snapshot's text): psycopg2 reads 'infinity'
    dates as date.max and time '24:00:00' as 00:00."""
    element = ext.new_type((oid,), f"CDC_{oid}",
                           lambda value, cursor: value if value is None or kept(value) else cast(value, cursor))
    return {oid: element, array_oid: ext.new_array_type((array_oid,), f"CDC_{array_oid}", element)}


def _infinite(text: str) -> bool:
    return text in ("infinity", "-infinity")


def _midnight_end(text: str) -> bool:
    return text.startswith("24:")  # time and timetz allow 24:00:00, a Python time does not


# By type OID (pg_type.h); arrays of each beside it.
PINNED: dict[int, Caster] = {
    **_keeping(1082, 1182, ext.PYDATE, _infinite),  # date
    **_keeping(1114, 1115, ext.PYDATETIME, _infinite),  # timestamp
    **_keeping(1184, 1185, ext.PYDATETIMETZ, _infinite),  # timestamptz
    **_keeping(1083, 1183, ext.PYTIME, _midnight_end),  # time
    **_keeping(1266, 1270, ext.PYTIME, _midnight_end),  # timetz
    114: _text, 199: ext.UNICODEARRAY,  # json
    3802: _text, 3807: ext.UNICODEARRAY,  # jsonb
    2950: _text, 2951: ext.UNICODEARRAY,  # uuid
    1186: _text, 1187: ext.UNICODEARRAY,  # interval
    1700: ext.DECIMAL, 1231: ext.DECIMALARRAY,  # numeric
    17: _then(psycopg2.BINARY, bytes), 1001: _then(ext.BINARYARRAY, bytes),  # bytea
    700: _then(ext.FLOAT, _single), 1021: _then(ext.FLOATARRAY, _single),  # real
    # Ranges as their text, which both targets take (psycopg2 would make Range objects PyMySQL cannot write).
    3904: _text, 3926: _text, 3906: _text, 3908: _text, 3910: _text, 3912: _text,
}


def caster(type_oid: int) -> Caster:
    """How a text value of type `type_oid` becomes the value the snapshot reads.

    `PINNED` holds, whatever typecasters the process registers globally: numeric -> Decimal, bytea -> bytes,
    real -> its exact single-precision value, json/jsonb -> the JSON text (the sink parses it), uuid -> str,
    interval -> its text in IntervalStyle postgres (a timedelta cannot hold months), arrays of those as lists,
    date/timestamp/timestamptz -> date, datetime, aware datetime in UTC, but 'infinity' and '-infinity' as text,
    time/timetz -> time, but '24:00:00' as text, arrays of those as lists. Other types go through psycopg2's
    typecasters (bool, int, arrays -> lists, ...); OIDs psycopg2 does not know (enums, domains, extension types)
    stay text."""
    return PINNED.get(type_oid) or ext.string_types.get(type_oid) or _text


# ---- messages -> events --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Relation:
    """What the last Relation message said about one relation id."""

    message: pgoutput.Relation
    table: TableId
    casters: tuple[Caster, ...]

    def image(self, values: tuple, cursor, key_only: bool = False, old: tuple | None = None) -> dict:
        """Column name -> value. Unchanged TOASTed values are left out unless `old` (a full old row) has them."""
        row = {}
        for i, (column, cast, value) in enumerate(zip(self.message.columns, self.casters, values)):
            if key_only and not column.is_key:
                continue
            if value is pgoutput.UNCHANGED and old is not None:
                value = old[i]
            if value is pgoutput.UNCHANGED:
                continue
            row[column.name] = value if value is None or isinstance(value, bytes) else cast(value, cursor)
        return row


class _Assembler:
    """Turns pgoutput messages into events:

        OUTSIDE --Begin--> INSIDE --Relation / Insert / Update / Delete / Truncate--> INSIDE --Commit--> OUTSIDE

    A Commit yields a Transaction of the captured changes, each positioned at the commit's end: PostgreSQL
    makes a transaction's changes visible at its commit, so that is where each of them takes effect. A Truncate
    of a captured table, and the first change read with a Relation that differs from the definition the table was
    read with so far (at first: its recorded schema, so DDL done while no run was reading counts too), yield a
    SchemaChange at once, positioned at the last commit end before it (resuming there replays its transaction).
    Transactions that end at or before `start` were applied already and yield nothing. With `part_events`, a
    transaction's changes are handed out in TransactionParts of that many (not positioned yet: the commit's end
    is unknown) whenever that many are held, and its Transaction holds the rest. A partition's changes count as
    its configured partitioned table's (`owners`).
    """

    def __init__(self, start: PgPosition, schemas: dict[TableId, TableSchema], cursor, catalog: Catalog,
                 part_events: int | None = None, owners: dict[TableId, TableId] | None = None) -> None:
        self.start = start
        self.part_events = part_events
        self.boundary = start  # the end of the last commit seen, or start
        self.schemas = schemas
        self.owners = owners or {}
        self.cursor = cursor
        self.inside = False
        self.replayed = False
        self.begin: pgoutput.Begin | None = None
        self.pending: list[tuple] = []  # (table, op, key, after, before)
        self.parted = False  # parts of the current transaction were handed out
        self.relations: dict[int, _Relation] = {}
        self.catalog = catalog
        self.accepted: dict[TableId, Shape] = {t: recorded_shape(s) for t, s in schemas.items()}
        self.unchecked: set[int] = set()  # relation ids whose last Relation no change has been read with yet
        self._handlers = {
            pgoutput.Begin: self._begin, pgoutput.Commit: self._commit, pgoutput.Relation: self._relation,
            pgoutput.Insert: self._insert, pgoutput.Update: self._update, pgoutput.Delete: self._delete,
            pgoutput.Truncate: self._truncate,
        }

    def feed(self, message: pgoutput.Message) -> list[Transaction | TransactionPart | SchemaChange]:
        handler = self._handlers.get(type(message))  # Origin and Type tell us nothing we use
        items = handler(message) if handler else []
        if self.inside and self.part_events and len(self.pending) >= self.part_events:
            return items + self._parts()
        return items

    def _parts(self) -> list[TransactionPart]:
        # Begin's final_lsn is where the commit record starts: the commit's end lies after it.
        n, floor = self.part_events, PgPosition(self.begin.final_lsn)
        parts = [TransactionPart([RowChange(*change) for change in self.pending[i:i + n]], floor)
                 for i in range(0, len(self.pending) - n + 1, n)]
        self.pending, self.parted = self.pending[len(parts) * n:], True
        return parts

    def _begin(self, message: pgoutput.Begin) -> list:
        # A commit record never straddles `start` (a commit end or a keepalive's walEnd), so a transaction
        # whose commit record starts before it also ends at or before it.
        self.inside, self.begin, self.pending, self.parted = True, message, [], False
        self.replayed = message.final_lsn < self.start.lsn
        return []

    def _commit(self, message: pgoutput.Commit) -> list[Transaction]:
        self.inside, pending, self.pending = False, self.pending, []
        if self.replayed:
            return []
        end = self.boundary = PgPosition(message.end_lsn)
        if not pending and not self.parted:  # after parts the end must come: it is what commits them
            return []
        changes = [RowChange(*change, position=end) for change in pending]
        return [Transaction(changes, end, message.commit_time.timestamp(), self.begin.xid)]

    def _relation(self, message: pgoutput.Relation) -> list:
        casters = tuple(caster(self.catalog.base_type(c.type_oid)) for c in message.columns)
        self.relations[message.relation_id] = _Relation(message, self._table_of(message), casters)
        self.unchecked.add(message.relation_id)
        return []

    def _table_of(self, message: pgoutput.Relation) -> TableId:
        """The captured table a relation is, by name or, once renamed, by relation id (a rename before the read
        began leaves a captured table without a relation: the task's publication holds only captured tables)."""
        named = TableId(message.namespace, message.name)
        named = self.owners.get(named, named)
        known = self.relations.get(message.relation_id)
        if named in self.schemas:
            return named
        if known is not None and known.table in self.schemas:
            return known.table
        if message.relation_id in self.catalog.relations:
            return self.catalog.relations[message.relation_id]
        return self.catalog.missing[0] if self.catalog.missing else named

    def _check(self, relation_id: int, relation: _Relation) -> list[SchemaChange]:
        """Compare a relation's definition with the one its table was read with, on the first change read with
        it (pgoutput sends a Relation before that change, inside the same transaction)."""
        self.unchecked.discard(relation_id)
        shape = relation_shape(relation.message, self.catalog.type_name, self.schemas[relation.table].excluded)
        change = describe_drift(self.accepted[relation.table], shape)
        self.accepted[relation.table] = shape
        return [SchemaChange(relation.table, change, self.boundary)] if change else []

    def _truncate(self, message: pgoutput.Truncate) -> list[SchemaChange]:
        if self.replayed:
            return []
        tables = [self.relations[r].table for r in message.relation_ids]
        return [SchemaChange(t, f"TRUNCATE {t}", self.boundary) for t in tables if t in self.schemas]

    def _captured(self, relation_id: int) -> tuple[_Relation | None, list[SchemaChange]]:
        """The relation of a change to apply, if captured, and how its definition changed."""
        relation = self.relations[relation_id]  # pgoutput sends a Relation before the first change of each
        if self.replayed or relation.table not in self.schemas:
            return None, []
        return relation, self._check(relation_id, relation) if relation_id in self.unchecked else []

    def _insert(self, message: pgoutput.Insert) -> list:
        relation, changed = self._captured(message.relation_id)
        if relation:
            after = relation.image(message.new, self.cursor)
            self._add(relation.table, Op.INSERT, after, None)
        return changed

    def _update(self, message: pgoutput.Update) -> list:
        relation, changed = self._captured(message.relation_id)
        if relation:
            before = None if message.old is None else relation.image(message.old, self.cursor, message.old_is_key)
            full_old = None if message.old_is_key else message.old
            after = relation.image(message.new, self.cursor, old=full_old)
            self._add(relation.table, Op.UPDATE, after, before)
        return changed

    def _delete(self, message: pgoutput.Delete) -> list:
        relation, changed = self._captured(message.relation_id)
        if relation:
            before = relation.image(message.old, self.cursor, message.old_is_key)
            self._add(relation.table, Op.DELETE, None, before)
        return changed

    def _add(self, table: TableId, op: Op, after: dict | None, before: dict | None) -> None:
        values = {**(before or {}), **(after or {})}  # the new key wins; the old one fills unsent columns
        key_columns = self.schemas[table].primary_key
        missing = [k for k in key_columns if k not in values]
        if missing:
            raise SourceSetupError(
                f"the log carries no value for key column(s) {', '.join(missing)} of {table} in a {op.value}",
                f"make the key the replica identity: ALTER TABLE {table} REPLICA IDENTITY USING INDEX <unique index "
                f"on ({', '.join(key_columns)})>, or REPLICA IDENTITY FULL")
        self.pending.append((table, op, tuple(values[k] for k in key_columns), after, before))


# ---- the stream ----------------------------------------------------------------------------------------------

def _first_line(exc: Exception, secret: str = "") -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return scrub(text, secret)


class PgLogReader:
    """Reads committed transactions of the captured tables from a logical replication slot (a `LogReader`).

    Positions are WAL LSNs: a Transaction ends at its commit's end LSN, an Idle at the last commit end or the
    server's decoding position (keepalive walEnd), whichever is later. Values: see `caster`; a row image may
    lack unchanged TOASTed columns (absent, never None). `before` is the full old row with REPLICA IDENTITY
    FULL, only the key columns when the key changed (or for a delete) with the default identity, else None.

    `acknowledge` reports a flush position to the server, which then may drop the WAL before it; psycopg2 may
    report a keepalive's position beyond it only when nothing handed out lies in between (see `Feedback`), so
    that an idle slot stops holding WAL back. While the reader holds back for that reason it yields
    Idle(flush=True): the consumer should commit what it has. A consumer that never acknowledges (`acknowledged`
    False: a bounded look at the log) is not waited for, and the slot may then be confirmed past what it read.
    """

    def __init__(self, url: DbUrl, slot: str, publication: str, schemas: dict[TableId, TableSchema],
                 acknowledged: bool = True) -> None:
        if not url.database:
            raise SourceSetupError(f"source url {url} names no database",
                                   "add it: postgresql://user@host:5432/<database>")
        self.url = url
        self.slot = slot
        self.publication = publication
        self.schemas = schemas
        self.acknowledged = acknowledged
        self._cursor = None
        self._closed = False
        self._ack: PgPosition | None = None  # sent by the reading thread: a replication cursor is not shared
        self._acked = threading.Event()  # wakes a reader that holds back

    def read(self, start: PgPosition, stop_at: PgPosition | None = None, part_events: int | None = None
             ) -> Iterator[Transaction | TransactionPart | SchemaChange | Idle]:
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
        conn = self._connect()
        catalog = None
        try:
            catalog = Catalog(self.url, list(self.schemas))
            cursor = conn.cursor()
            self._start(cursor, start)
            self._cursor = cursor
            yield from self._stream(cursor, start, stop_at, catalog, part_events, owners)
        finally:
            self._cursor = None
            conn.close()
            if catalog is not None:
                catalog.close()

    def _stream(self, cursor, start: PgPosition, stop_at: PgPosition | None, catalog: Catalog,
                part_events: int | None, owners: dict) -> Iterator:
        asm = _Assembler(start, self.schemas, cursor, catalog, part_events, owners)
        feedback = Feedback(lambda **kw: self._call(lambda: cursor.send_feedback(**kw)), start.lsn)
        sent = reported = start  # `sent`: every transaction committing before it was received
        last_yield = time.monotonic()
        holding_back = False
        while not self._closed:
            self._acked.clear()
            if (ack := self._ack) is not None and ack.lsn > feedback.applied:  # only grows: nothing lost to a race
                feedback.acknowledge(ack.lsn)
            message = None
            if feedback.may_read() or not self.acknowledged:
                holding_back = False
                message = self._call(cursor.read_message)
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
                self._acked.wait(POLL_INTERVAL)
            elif message is None:
                select.select([cursor], [], [], POLL_INTERVAL)

    def acknowledge(self, position: PgPosition) -> None:
        """The target stored everything up to `position`: let the slot release the WAL before it. Safe to call
        from another thread than the one reading."""
        if self._cursor is not None:
            self._ack = position
            self._acked.set()
        else:
            _advance_slot(self.url, self.slot, position)

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

    def _connect(self):
        try:
            return psycopg2.connect(
                host=self.url.host, port=self.url.port, user=self.url.user or None,
                password=self.url.password or None, dbname=self.url.database, connect_timeout=10,
                client_encoding="UTF8", options=SESSION_OPTIONS, connection_factory=LogicalReplicationConnection)
        except psycopg2.OperationalError as exc:
            raise UnreachableError(f"cannot open a replication connection to {self.url}: "
                                   f"{_first_line(exc, self.url.password)}", NETWORK_HINT) from None

    def _start(self, cursor, start: PgPosition) -> None:
        self._call(lambda: cursor.start_replication(
            slot_name=self.slot, decode=False, start_lsn=start.lsn, status_interval=STATUS_INTERVAL,
            options={"proto_version": "1", "publication_names": self.publication}))

    def _call(self, action: Callable[[], Any]) -> Any:
        try:
            return action()
        except psycopg2.Error as exc:
            raise self._translate(exc) from None

    def _translate(self, exc: psycopg2.Error) -> Exception:
        reason = _first_line(exc, self.url.password)
        if isinstance(exc, psycopg2.errors.UndefinedObject) and "publication" in reason:
            return PositionLost(
                f"publication {self.publication} is missing on {self.url} for the changes being decoded ({reason}); "
                "creating it now does not help: the server reads publications as of each change", REPLAN_HINT)
        if isinstance(exc, psycopg2.errors.UndefinedObject):
            return PositionLost(f"replication slot {self.slot} does not exist on {self.url} ({reason})", REPLAN_HINT)
        if isinstance(exc, psycopg2.errors.ObjectNotInPrerequisiteState) and "cannot read from" in reason:
            return PositionLost(f"replication slot {self.slot} on {self.url} was invalidated ({reason}): it held "
                                "back more WAL than max_slot_wal_keep_size allows", REPLAN_HINT)
        if isinstance(exc, psycopg2.errors.ObjectInUse):
            return SourceSetupError(f"replication slot {self.slot} on {self.url} is in use ({reason})",
                                    "stop the other reader of this slot (another incremental run of the task?)")
        if exc.pgcode is None or exc.pgcode[:2] in ("08", "57"):  # connection lost, server shutting down
            return UnreachableError(f"lost the replication connection to {self.url} ({reason})", NETWORK_HINT)
        return SourceSetupError(f"logical replication from slot {self.slot} on {self.url} failed ({reason})",
                                "check the slot, the publication and the server log")
