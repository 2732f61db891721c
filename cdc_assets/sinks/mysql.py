"""MySQL/MariaDB as a target: type mapping, staging, and applying rows as delete by key, then insert."""
from __future__ import annotations

import datetime as dt
import json
import math
import re
from decimal import Decimal
from functools import cached_property
from typing import Any, Callable

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.errors import TableError
from cdc_assets.sinks.base import Moves, SqlSink, Transport

DELETE_CHUNK = 1000  # keys per DELETE ... IN (...)

_FROM_POSTGRES = {
    Kind.BOOL: "tinyint(1)", Kind.FLOAT32: "float", Kind.FLOAT64: "double", Kind.BINARY: "longblob",
    Kind.DATE: "date", Kind.JSON: "json", Kind.UUID: "char(36)", Kind.ARRAY: "json", Kind.ENUM: "text",
    Kind.INTERVAL: "varchar(255)", Kind.OTHER: "longtext",
}
_INTS = {16: "smallint", 32: "int", 64: "bigint"}
_TRAILING_ZEROS = re.compile(r"(\.\d*?)0+(?=\D|$)")  # of a fraction of a second


class MysqlSink(SqlSink):
    dialect = "mysql"
    text_type = "LONGTEXT"

    def column_type(self, column: Column, in_key: bool) -> str:
        if self.source_dialect == "mysql":
            # MariaDB reports JSON as longtext; declaring json restores its validity check.
            declared = "json" if column.kind == Kind.JSON else column.native
        else:
            declared = postgres_to_mysql(column)
            # MySQL cannot index unbounded TEXT/BLOB: key columns get the longest indexable form.
            if in_key and declared in ("longtext", "text"):
                declared = "varchar(768)"
            if in_key and declared == "longblob":
                declared = "varbinary(3072)"
        if in_key and column.kind == Kind.STRING:
            # A case/accent-insensitive or PAD SPACE key would take 'abc'/'ABC', 'e'/'é', 'x'/'x ' for one key.
            declared += f" CHARACTER SET utf8mb4 COLLATE {self.key_collation}"
        return declared

    @cached_property
    def key_collation(self) -> str:
        """Binary and NO PAD: MySQL 8's utf8mb4_0900_bin, MariaDB's utf8mb4_nopad_bin (utf8mb4_bin pads)."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT COLLATION_NAME FROM information_schema.COLLATIONS "
                        "WHERE COLLATION_NAME IN ('utf8mb4_0900_bin', 'utf8mb4_nopad_bin')")
            found = [r[0] for r in cur.fetchall()]
        if not found:
            raise TableError(f"{self.url} offers no binary NO PAD utf8mb4 collation for text keys",
                             "use MySQL >= 8.0 or MariaDB >= 10.2 as the target")
        return found[0]

    def check_key_columns(self, schema: TableSchema) -> None:
        text_keys = {c.name: c for c in schema.columns if c.name in schema.primary_key and c.kind == Kind.STRING}
        if not text_keys:
            return
        with self.conn.cursor() as cur:
            cur.execute("SELECT COLUMN_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
                        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (schema.table.namespace, schema.table.name))
            collations = dict(cur.fetchall())
        for name, column in text_keys.items():
            have = collations.get(name)
            if have in (self.key_collation, column.collation) or have is None:
                continue  # binary NO PAD, or exactly how the source compares the key
            raise TableError(
                f"key column '{name}' of target table {schema.table} on {self.url} has collation {have}, which takes "
                "keys the source keeps apart (case, accents or trailing spaces) for one key",
                f"ALTER TABLE {self.table_sql(schema.table)} MODIFY {self.q(name)} "
                f"{self.column_type(column, True)} NOT NULL, or drop the target table so it is created from the source")

    def load_expr(self, t: Transport, staged: str) -> str:
        if t.as_text and t.column.kind == Kind.BIT and self.column_type(t.column, False).startswith("bit"):
            return f"CAST(CONV({staged}, 2, 10) AS UNSIGNED)"  # a bit string, not its characters' bytes
        return staged  # MySQL parses text into temporal, JSON, ENUM/SET and DECIMAL columns on insert

    def delete_staged_keys_sql(self, target: str, staging: str, key_match) -> str:
        # MariaDB cannot resolve aliases in a multi-table DELETE without a default database: no aliases.
        return f"DELETE {target} FROM {target} JOIN {staging} ON {key_match(target, staging)}"

    def create_namespace_sql(self, namespace: str) -> str:
        return f"CREATE DATABASE IF NOT EXISTS {self.q(namespace)} CHARACTER SET utf8mb4"

    def apply_changes(self, cursor, schema: TableSchema, changes: TableChanges) -> None:
        table, key = self.table_sql(schema.table), schema.primary_key
        adapt = {c.name: f for c in schema.columns if (f := self._adapter(c)) is not None}

        def value(name: str, v: Any) -> Any:
            return adapt[name](v) if v is not None and name in adapt else v

        moves = self.plan_moves(cursor, schema, changes)
        gone = [*changes.deletes, *changes.rows, *moves.copies]
        one = f"({', '.join(['%s'] * len(key))})"
        cols = ", ".join(self.q(k) for k in key)
        for i in range(0, len(gone), DELETE_CHUNK):
            chunk = gone[i:i + DELETE_CHUNK]
            cursor.execute(f"DELETE FROM {table} WHERE ({cols}) IN ({', '.join([one] * len(chunk))})",
                           [value(k, v) for row in chunk for k, v in zip(key, row)])
        if changes.rows:
            names = [c.name for c in schema.columns]
            # PyMySQL turns executemany of INSERT ... VALUES into multi-row statements.
            cursor.executemany(f"INSERT INTO {table} ({', '.join(self.q(n) for n in names)}) "
                               f"VALUES ({', '.join(['%s'] * len(names))})",
                               [tuple(value(n, row.get(n)) for n in names) for row in changes.rows.values()])
        if moves.copies:
            self._insert_copies(cursor, schema, moves, value)
        where = " AND ".join(f"{self.q(k)} = %s" for k in key)
        for row in {**changes.partial, **moves.updates}.values():
            sets = [n for n in row if n not in key]
            if sets:
                cursor.execute(f"UPDATE {table} SET {', '.join(f'{self.q(n)} = %s' for n in sets)} WHERE {where}",
                               [value(n, row[n]) for n in sets] + [value(k, row[k]) for k in key])

    def target_row(self, cursor, schema: TableSchema, key: tuple) -> tuple | None:
        # PyMySQL's values write back unchanged (BIT and BLOB as bytes, DECIMAL, temporal types): no adapters.
        adapt = {c.name: f for c in schema.columns if (f := self._adapter(c)) is not None}
        cursor.execute(f"SELECT {', '.join(self.q(c.name) for c in schema.columns)} FROM {self.table_sql(schema.table)} "
                       f"WHERE " + " AND ".join(f"{self.q(k)} = %s" for k in schema.primary_key),
                       [adapt[k](v) if v is not None and k in adapt else v for k, v in zip(schema.primary_key, key)])
        return cursor.fetchone()

    def _insert_copies(self, cursor, schema: TableSchema, moves: Moves, value: Callable[[str, Any], Any]) -> None:
        """The old keys' rows (as read) under their new keys (log values), before the moves' columns update them."""
        names, key = [c.name for c in schema.columns], schema.primary_key
        cursor.executemany(f"INSERT INTO {self.table_sql(schema.table)} ({', '.join(self.q(n) for n in names)}) "
                           f"VALUES ({', '.join(['%s'] * len(names))})",
                           [tuple(value(n, new[key.index(n)]) if n in key else row[i] for i, n in enumerate(names))
                            for new, row in moves.copies.items()])

    def _adapter(self, column: Column) -> Callable[[Any], Any] | None:
        """Log values that PyMySQL would render differently from what the snapshot loads."""
        declared = self.column_type(column, False)
        if column.kind == Kind.BIT and declared.startswith("bit"):
            return lambda v: int(v, 2)  # a bit string, not its characters' bytes
        if column.kind == Kind.ARRAY:
            return _json_array
        return None

    def relation_bytes(self, cursor, table: str, name: TableId) -> int:
        cursor.execute("SELECT COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0) FROM information_schema.TABLES "
                       "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (name.namespace, name.name))
        row = cursor.fetchone()
        return int(row[0]) if row else 0

    def existing_columns(self, table: TableId) -> set[str] | None:
        with self.conn.cursor() as cur:
            cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                        (table.namespace, table.name))
            names = {r[0] for r in cur.fetchall()}
        return names or None


def _json_array(value: Any) -> str:
    """A PostgreSQL array (nested lists) as the text `to_json(col)` gives the snapshot: compact, characters
    unescaped, numbers as numbers, temporal values in ISO 8601 (MariaDB's JSON keeps the text as written)."""
    if isinstance(value, list):
        return "[" + ",".join(_json_array(v) for v in value) + "]"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int) or (isinstance(value, Decimal) and value.is_finite()):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, (dt.date, dt.time)):  # dt.datetime is a dt.date; to_json drops trailing zeros
        return json.dumps(_TRAILING_ZEROS.sub(r"\1", value.isoformat()))
    return json.dumps(value if isinstance(value, str) else str(value), ensure_ascii=False)


def postgres_to_mysql(column: Column) -> str:
    kind = column.kind
    if kind == Kind.INT:
        return _INTS[column.bits or 64]
    if kind == Kind.DECIMAL:
        # MySQL caps DECIMAL at (65,30); unconstrained PostgreSQL numeric gets the widest it has (README: lossy).
        if column.precision is None or column.precision > 65 or (column.scale or 0) > 30:
            return "decimal(65,30)"
        return f"decimal({column.precision},{column.scale})"
    if kind == Kind.STRING:
        if column.length is not None:
            base = "char" if column.native.startswith("character(") else "varchar"
            return f"{base}({column.length})"
        return "longtext"
    if kind in (Kind.DATETIME, Kind.TIMESTAMP):
        # DATETIME, not TIMESTAMP: MySQL TIMESTAMP ends in 2038. Instants are stored as their UTC wall clock.
        return f"datetime({min(column.precision or 0, 6)})"
    if kind == Kind.TIME:
        return f"time({min(column.precision or 0, 6)})"
    if kind == Kind.BIT:
        return f"bit({column.length})" if column.length and column.length <= 64 else "varchar(255)"
    return _FROM_POSTGRES[kind]
