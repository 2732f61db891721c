"""Hold a split's key range still on the source: no transaction can change a row of it (insert, update,
delete) until the hold ends. While it lasts, the range's rows at every log position from the hold's start to
the log end are the rows read under it, which is what verification and a repair re-read rely on.

- MySQL/MariaDB (InnoDB): a locking read `... LOCK IN SHARE MODE` of the range by its key. Under REPEATABLE
  READ it takes next-key locks on the rows and the gaps between them, so inserts into the range wait too.
  A writer that changed the range before commits (binlog first, then InnoDB) before the lock is granted, so
  its transaction is in the binlog before any position read under the hold.
- PostgreSQL: `LOCK TABLE ... IN SHARE MODE`, because row locks leave inserts free. Every writer of the table
  waits (not only of the range): the price of no predicate locks. A writer's commit record is flushed before its
  locks go (synchronous_commit on), so it is before `pg_current_wal_lsn()` read under the hold.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterator

from cdc_assets.core.keys import range_predicate
from cdc_assets.core.splits import KeyRange
from cdc_assets.core.tables import TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect, qualified, quote_ident
from cdc_assets.dbapi.errors import first_line, lock_conflict
from cdc_assets.errors import SourceBusy

LOCK_WAIT_SECS = 30.0  # waiting for writers in flight before the hold is granted (a repair)


class SplitHold:
    """An open hold on one split's range: `rows` are the range's rows as held, in key order."""

    def __init__(self, conn, rows: list[tuple]) -> None:
        self.conn = conn
        self.rows = rows


@contextmanager
def hold_range(url: DbUrl, schema: TableSchema, key_range: KeyRange, kind: str, select: list[str] | None = None,
               lock_wait_secs: float = LOCK_WAIT_SECS) -> Iterator[SplitHold]:
    """Hold `key_range` of the table still, reading its rows (`select`: the column expressions, default the key)
    under the hold; released (rolled back: nothing is written) when the block ends. Raises SourceBusy when the
    hold is not granted within `lock_wait_secs` (whole seconds on MySQL, at least 1) or the server chose it as a
    deadlock's victim: nothing is held then."""
    dialect = url.db_type
    q = lambda name: quote_ident(dialect, name)  # noqa: E731
    table = qualified(dialect, schema.table.namespace, schema.table.name)
    columns = ", ".join(select or [q(k) for k in schema.primary_key])
    where = range_predicate(q(schema.split_column.name), key_range, kind, dialect)
    order = ", ".join(q(k) for k in schema.primary_key)
    conn = connect(url, autocommit=False)
    try:
        with conn.cursor() as cur:
            try:
                if dialect == "mysql":
                    wait = max(1, math.ceil(lock_wait_secs))
                    # Row locks, and the table's metadata lock (a DDL in flight), each wait as long at most.
                    cur.execute(f"SET SESSION innodb_lock_wait_timeout = {wait}, SESSION lock_wait_timeout = {wait}")
                    cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    cur.execute("START TRANSACTION")
                    cur.execute(f"SELECT {columns} FROM {table} WHERE {where} ORDER BY {order} LOCK IN SHARE MODE")
                else:
                    cur.execute(f"SET LOCAL lock_timeout = '{max(1, round(lock_wait_secs * 1000))}ms'")
                    cur.execute("SET LOCAL extra_float_digits = 3")  # real and double exactly, before PostgreSQL 12 too
                    cur.execute(f"LOCK TABLE {table} IN SHARE MODE")
                    cur.execute(f"SELECT {columns} FROM {table} WHERE {where} ORDER BY {order}")
            except Exception as exc:
                conflict = lock_conflict(exc)
                if conflict is None:
                    raise
                raise SourceBusy(f"{schema.table}: the range {key_range} could not be held on the source: "
                                 f"{conflict} ({first_line(exc, url.password)})",
                                 "the table's writers held it: try again when fewer transactions write it",
                                 conflict) from None
            rows = [tuple(r) for r in cur.fetchall()]
        yield SplitHold(conn, rows)
    finally:
        try:
            conn.rollback()
        finally:
            conn.close()
