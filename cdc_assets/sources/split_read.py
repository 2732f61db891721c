"""A split's range read without a lock: one plain statement, so one consistent view of the source (InnoDB's
consistent read, PostgreSQL's statement snapshot); writers of the range never wait for it. What changed around
the read is told apart afterwards (engine/verify_window.py): by the log between two watermarks, or on PostgreSQL
by each row's version (`xmin`: the transaction that wrote the row version read), read beside the row.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import pymysql.cursors

from cdc_assets.core.keys import range_predicate
from cdc_assets.core.splits import KeyRange
from cdc_assets.core.tables import TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect, qualified, quote_ident


@dataclass(frozen=True)
class SplitRead:
    """The range's rows (each column as the read selected it), in key order; `versions`: each row's version by
    its key values, where the source keeps one (PostgreSQL), else None."""

    rows: list[tuple]
    versions: dict[tuple, str] | None = None


def read_range(url: DbUrl, schema: TableSchema, key_range: KeyRange, kind: str, select: list[str] | None = None,
               versions: bool = False, rows_per_second: int = 0, keys_only: bool = False, conn=None) -> SplitRead:
    """`select`: every column's expression in schema order (default the key alone). With `versions`
    (PostgreSQL), each row's xmin too, by the key values as selected. `rows_per_second` (0: as fast as it
    comes): the rows are fetched from a server-side cursor at that rate, so a large split costs the source a
    trickle instead of a burst; it is still one statement, so still one consistent view. `keys_only`: of
    `select`, the key columns' expressions alone (rows of the key values as `select` renders them). `conn`: an
    open autocommit connection to read on, left open and in autocommit: a PostgreSQL server starts a process for
    each new connection (4 ms of its CPU measured, about what reading 5,000 rows costs it), which a verification
    round would otherwise cost its source twice per split."""
    dialect = url.db_type
    q = lambda name: quote_ident(dialect, name)  # noqa: E731
    table = qualified(dialect, schema.table.namespace, schema.table.name)
    key = [q(k) for k in schema.primary_key]
    columns = list(select or key)
    key_at = ([i for k in schema.primary_key for i, c in enumerate(schema.columns) if c.name == k] if select
              else list(range(len(key))))
    if keys_only:
        columns, key_at = [columns[i] for i in key_at], list(range(len(key_at)))
    where = range_predicate(q(schema.split_column.name), key_range, kind, dialect)
    listed = ["xmin::text", *columns] if versions else columns
    statement = f"SELECT {', '.join(listed)} FROM {table} WHERE {where} ORDER BY {', '.join(key)}"
    # A PostgreSQL server-side cursor lives in a transaction: one statement in it, so one snapshot all the same.
    in_transaction = bool(rows_per_second) and dialect == "postgres"
    own = conn is None
    if own:
        conn = connect(url, autocommit=not in_transaction)
    try:
        if dialect == "postgres":
            with conn.cursor() as cur:
                cur.execute("SET extra_float_digits = 3")  # real and double exactly, before PostgreSQL 12 too
        if in_transaction and not own:
            conn.autocommit = False
        with _cursor(conn, dialect, rows_per_second) as cur:
            cur.execute(statement)
            rows = _fetch(cur, rows_per_second)
    finally:
        if own:
            conn.close()
        elif in_transaction and not conn.closed:  # lent in autocommit: given back so (the read only read)
            conn.rollback()
            conn.autocommit = True
    if not versions:
        return SplitRead(rows)
    return SplitRead([r[1:] for r in rows], {tuple(r[1 + i] for i in key_at): r[0] for r in rows})


def _cursor(conn, dialect: str, rows_per_second: int):
    if not rows_per_second:
        return conn.cursor()
    if dialect == "postgres":
        return conn.cursor(name="cdc_assets_verify_read")
    return conn.cursor(pymysql.cursors.SSCursor)  # rows as they are fetched, not all at once


def _fetch(cur, rows_per_second: int) -> list[tuple]:
    if not rows_per_second:
        return [tuple(r) for r in cur.fetchall()]
    chunk = max(100, rows_per_second // 20)  # about twenty fetches a second
    rows: list[tuple] = []
    started = time.monotonic()
    while batch := cur.fetchmany(chunk):
        rows.extend(tuple(r) for r in batch)
        time.sleep(max(0.0, len(rows) / rows_per_second - (time.monotonic() - started)))
    return rows


def changed_versions(url: DbUrl, schema: TableSchema, key_range: KeyRange, kind: str, select: list[str],
                     before: dict[tuple, str], conn=None, rows_per_second: int = 0) -> set[tuple]:
    """The keys (as `select` renders them) whose row version differs from `before` now: updated, deleted or
    inserted since. Only the keys and versions are read again: the other columns would cost the source a second
    read of the whole range for nothing. Paced as the first read was, when it was."""
    now = read_range(url, schema, key_range, kind, select, versions=True, keys_only=True, conn=conn,
                     rows_per_second=rows_per_second).versions or {}
    return {k for k in before.keys() | now.keys() if before.get(k) != now.get(k)}
