"""PostgreSQL as a target: type mapping, staging (UNLOGGED), and `INSERT ... ON CONFLICT DO UPDATE`."""
from __future__ import annotations

from cdc_assets.core.tables import Column, Kind, TableId
from cdc_assets.sinks.base import SqlSink, Transport

_FROM_MYSQL = {
    Kind.UINT64: "numeric(20,0)", Kind.FLOAT32: "real", Kind.FLOAT64: "double precision", Kind.BINARY: "bytea",
    Kind.DATE: "date", Kind.YEAR: "smallint", Kind.JSON: "jsonb", Kind.ENUM: "text", Kind.SET: "text",
    Kind.UUID: "uuid", Kind.INTERVAL: "interval", Kind.OTHER: "text", Kind.BOOL: "boolean",
    # MySQL TIME spans -838:59:59..838:59:59; PostgreSQL's time cannot, interval holds every value.
    Kind.TIME: "interval",
}


class PostgresSink(SqlSink):
    dialect = "postgres"
    text_type = "text"

    def column_type(self, column: Column, in_key: bool) -> str:
        if self.source_dialect == "postgres":
            # Same engine: the declaration itself, except user-defined enums, which may not exist here.
            return "text" if column.kind == Kind.ENUM else column.native
        return mysql_to_postgres(column)

    def load_expr(self, t: Transport, staged: str) -> str:
        return f"{staged}::{self.column_type(t.column, False)}" if t.as_text else staged

    def delete_staged_keys_sql(self, target: str, staging: str, key_match) -> str:
        return f"DELETE FROM {target} t USING {staging} s WHERE {key_match('t', 's')}"

    def create_namespace_sql(self, namespace: str) -> str:
        return f"CREATE SCHEMA IF NOT EXISTS {self.q(namespace)}"

    def staging_prefix(self) -> str:
        return "CREATE UNLOGGED TABLE"  # staging is rebuilt after a crash anyway: skip the WAL

    def relation_bytes(self, cursor, table: str, name: TableId) -> int:
        cursor.execute("SELECT pg_total_relation_size(%s::regclass)", (table,))
        return int(cursor.fetchone()[0])

    def existing_columns(self, table: TableId) -> set[str] | None:
        with self.conn.cursor() as cur:
            cur.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                        (table.namespace, table.name))
            names = {r[0] for r in cur.fetchall()}
        return names or None


def mysql_to_postgres(column: Column) -> str:
    kind = column.kind
    if kind == Kind.INT:
        bits = (column.bits or 64) + (1 if column.unsigned else 0)  # unsigned needs one more bit signed
        return "smallint" if bits <= 16 else "integer" if bits <= 32 else "bigint"
    if kind == Kind.DECIMAL:
        return f"numeric({column.precision},{column.scale})"
    if kind == Kind.STRING:
        # MySQL returns CHAR(n) without trailing spaces; varchar(n) keeps the value as MySQL returns it.
        return f"varchar({column.length})" if column.native.startswith(("char", "varchar")) else "text"
    if kind in (Kind.DATETIME, Kind.TIMESTAMP):
        base = "timestamp" if kind == Kind.DATETIME else "timestamptz"
        return f"{base}({column.precision or 0})"
    if kind == Kind.BIT:
        return f"bit({column.length})"
    return _FROM_MYSQL[kind]
