"""The task's publication and logical replication slot: their names, and creating, checking, advancing and
dropping them over a plain autocommit connection.

The slot keeps WAL from its restart_lsn until its reader reports a later flush position (PostgreSQL 15
"Logical Decoding Concepts"); the publication decides which tables' changes pgoutput sends.
"""
from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass

import psycopg2
import psycopg2.errors

from cdc_assets.core.positions import PgPosition
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect, qualified, quote_ident
from cdc_assets.dbapi.errors import first_line
from cdc_assets.errors import REPLAN_HINT, PositionLost, SourceSetupError, TableError

MAX_IDENTIFIER = 63  # NAMEDATALEN - 1: longer names are truncated by the server (slot names are refused)
RELEASE_TIMEOUT = 5.0  # seconds a closed walsender may take to release its slot
RELEASE_POLL = 0.2  # seconds between tries while it does
LOST = "lost"  # pg_replication_slots.wal_status of an invalidated slot: its WAL was removed, it decodes nothing

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
        raise TableError(f"cannot publish {listed}: {first_line(exc)}",
                         "create the table, or remove it from source.tables") from None
    except psycopg2.errors.InsufficientPrivilege as exc:
        raise SourceSetupError(f"cannot create or alter publication {name}: {first_line(exc)}",
                               "run as the owner of the tables (or a superuser), with CREATE on the database") from None


def drop_publication(conn, name: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"DROP PUBLICATION IF EXISTS {quote_ident('postgres', name)}")


@dataclass(frozen=True)
class SlotState:
    """A slot as pg_replication_slots shows it."""

    plugin: str
    database: str
    active: bool
    restart_lsn: PgPosition | None  # the oldest WAL the slot keeps
    confirmed_flush_lsn: PgPosition | None  # the position acknowledged by the reader
    wal_status: str | None  # reserved / extended / unreserved / lost (lost: the slot is unusable)


_SLOT_SQL = """
SELECT plugin, database, active, restart_lsn::text, confirmed_flush_lsn::text, wal_status
FROM pg_replication_slots WHERE slot_name = %s"""


def slot_state(conn, slot: str) -> SlotState | None:
    """The state of `slot`, or None when it does not exist."""
    with conn.cursor() as cur:
        cur.execute(_SLOT_SQL, (slot,))
        row = cur.fetchone()
    if row is None:
        return None
    plugin, database, active, restart, confirmed, wal_status = row
    lsn = lambda text: None if text is None else PgPosition.parse_lsn(text)  # noqa: E731
    return SlotState(plugin, database, active, lsn(restart), lsn(confirmed), wal_status)


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
            f"cannot create replication slot {slot}: {first_line(exc)}",
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
        raise SourceSetupError(f"cannot drop replication slot {slot}: {first_line(exc)}",
                               "stop the task's incremental run first") from None


def advance_slot(url: DbUrl, slot: str, position: PgPosition) -> None:
    """Move the slot's confirmed position forward by SQL (never back: the server refuses that)."""
    conn = connect(url)
    try:
        _once_released(conn, "SELECT pg_replication_slot_advance(slot_name, %s::pg_lsn) FROM pg_replication_slots "
                             "WHERE slot_name = %s AND confirmed_flush_lsn < %s::pg_lsn",
                       (str(position), slot, str(position)))
    finally:
        conn.close()


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
            time.sleep(RELEASE_POLL)
