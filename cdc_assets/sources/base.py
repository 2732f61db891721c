"""What every relational source offers the planner and the snapshot, whatever its log protocol."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable, Protocol

from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.keys import key_kind, to_key_value, to_param
from cdc_assets.core.positions import Position
from cdc_assets.core.splits import KeyValue
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect, qualified, quote_ident
from cdc_assets.errors import TableError


@dataclass(frozen=True)
class KeyStats:
    min: KeyValue | None
    max: KeyValue | None
    rows: int  # estimate from statistics, exact when statistics are missing


class Source(Protocol):
    dialect: str

    def check_capture(self) -> list[str]:
        """Raise SourceSetupError when the server cannot be captured (binlog off, wal_level, ...); return notes
        for the plan output (log retention, warnings)."""

    def describe(self, table: TableId, split_column: str | None = None) -> TableSchema: ...

    def current_position(self) -> Position: ...

    def key_stats(self, schema: TableSchema, kind: str) -> KeyStats: ...

    def key_at_offset(self, schema: TableSchema, kind: str, start: KeyValue | None, offset: int) -> KeyValue | None: ...

    def next_key_after(self, schema: TableSchema, kind: str, value: KeyValue) -> KeyValue | None: ...

    def jdbc(self) -> JdbcEndpoint: ...

    def select_expr(self, column: Column, target_dialect: str) -> tuple[str, bool]:
        """SQL for one column in a typed snapshot read (MySQL targets), and whether it travels as text."""

    def copy_line(self, columns: list[Column], tag_sql: str, declared: Callable[[Column], str]) -> str:
        """SQL rendering a row as one PostgreSQL COPY text line, `tag_sql` as its first field; `declared`: each
        column's type on the target."""

    def table_sql(self, table: TableId) -> str: ...

    def quote(self, name: str) -> str: ...

    def close(self) -> None: ...


class SqlKeyProbes:
    """Key probes in SQL both MySQL and PostgreSQL accept; needs `self.conn`, `quote()` and `table_sql()`."""

    def _scalar(self, sql: str, params: tuple = ()):
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            row = cur.fetchone()
        return None if row is None else row[0]

    def key_at_offset(self, schema: TableSchema, kind: str, start: KeyValue | None, offset: int) -> KeyValue | None:
        """The split-column value `offset` rows after `start` (inclusive) in key order, or None past the end."""
        k = self.quote(schema.split_column.name)
        where, params = (f"WHERE {k} >= %s ", (to_param(start, kind),)) if start is not None else ("", ())
        value = self._scalar(f"SELECT {k} FROM {self.table_sql(schema.table)} {where}ORDER BY {k} LIMIT 1 OFFSET {offset}", params)
        return None if value is None else to_key_value(value, kind)

    def next_key_after(self, schema: TableSchema, kind: str, value: KeyValue) -> KeyValue | None:
        k = self.quote(schema.split_column.name)
        found = self._scalar(f"SELECT MIN({k}) FROM {self.table_sql(schema.table)} WHERE {k} > %s", (to_param(value, kind),))
        return None if found is None else to_key_value(found, kind)

    def _min_max(self, schema: TableSchema, kind: str) -> tuple[KeyValue | None, KeyValue | None]:
        k = self.quote(schema.split_column.name)
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT MIN({k}), MAX({k}) FROM {self.table_sql(schema.table)}")
            lo, hi = cur.fetchone()
        return (None if lo is None else to_key_value(lo, kind)), (None if hi is None else to_key_value(hi, kind))

    def _count(self, table: TableId) -> int:
        return int(self._scalar(f"SELECT COUNT(*) FROM {self.table_sql(table)}"))


def resolve_key(table: TableId, columns: tuple[Column, ...], pk: tuple[str, ...], split_column: str | None,
                is_unique) -> TableSchema:
    """Pick the key the snapshot splits and upserts on: the primary key, or a configured unique column."""
    names = {c.name for c in columns}
    if split_column is None:
        if not pk:
            raise TableError(
                f"table {table} has no primary key",
                f"add one, or set source.split_columns: {{{table}: <unique NOT NULL column>}}")
        key = pk
    else:
        if split_column not in names:
            raise TableError(f"split column '{split_column}' does not exist in table {table}",
                             f"pick one of: {', '.join(sorted(names))}")
        if pk and split_column != pk[0]:
            raise TableError(f"split column '{split_column}' of {table} is not its primary key's first column ({pk[0]})",
                             "remove it from source.split_columns; tables with a primary key split on it")
        key = pk or (split_column,)
        if not pk:
            col = next(c for c in columns if c.name == split_column)
            if col.nullable or not is_unique(split_column):
                raise TableError(f"split column '{split_column}' of {table} must be NOT NULL and carry a unique index",
                                 "add a unique index on it (upserts need a unique key), or choose another column")
    schema = TableSchema(table, columns, key)
    if key_kind(schema.split_column) is None:
        raise TableError(f"cannot split {table} on column '{key[0]}' of type {schema.split_column.native}",
                         "split on an integer, decimal, string, uuid, date or binary column")
    return schema


PRESENT_CHUNK = 1000  # keys per lookup


def present_keys(url: DbUrl, schema: TableSchema, keys: list[tuple]) -> set[tuple]:
    """Which of `keys` the source table holds now, compared exactly: text byte for byte, since a case- or
    accent-insensitive collation would call 'abc' and 'ABC' one key. Keys come back as `keys` gave them."""
    dialect = url.db_type
    exact = {c.name for c in schema.columns if c.kind in (Kind.STRING, Kind.ENUM)} if dialect == "mysql" else set()
    cols = ", ".join(("BINARY " if k in exact else "") + quote_ident(dialect, k) for k in schema.primary_key)
    one = "(" + ", ".join("BINARY %s" if k in exact else "%s" for k in schema.primary_key) + ")"
    table = qualified(dialect, schema.table.namespace, schema.table.name)
    by_norm = {tuple(map(_comparable, key)): key for key in keys}
    found: set[tuple] = set()
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            for i in range(0, len(keys), PRESENT_CHUNK):
                chunk = keys[i:i + PRESENT_CHUNK]
                cur.execute(f"SELECT {cols} FROM {table} WHERE ({cols}) IN ({', '.join([one] * len(chunk))})",
                            [v for key in chunk for v in key])
                found.update(by_norm[n] for row in cur.fetchall() if (n := tuple(map(_comparable, row))) in by_norm)
    finally:
        conn.close()
    return found


def _comparable(value):
    """One form for a key value, whichever driver and engine returned it."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value)
        try:
            return value.decode("utf-8")  # MySQL returns BINARY-compared text as bytes
        except UnicodeDecodeError:
            return value
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
