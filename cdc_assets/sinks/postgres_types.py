"""PostgreSQL types: of a column read from another engine (docs/connectors/mysql.md, "Type mapping"), and of a target's columns."""
from __future__ import annotations

from cdc_assets.core.tables import Column, Kind

_FROM_MYSQL = {
    Kind.UINT64: "numeric(20,0)", Kind.FLOAT32: "real", Kind.FLOAT64: "double precision", Kind.BINARY: "bytea",
    Kind.DATE: "date", Kind.YEAR: "smallint", Kind.JSON: "jsonb", Kind.ENUM: "text", Kind.SET: "text",
    Kind.UUID: "uuid", Kind.INTERVAL: "interval", Kind.OTHER: "text", Kind.BOOL: "boolean",
    Kind.GEOMETRY: "bytea",  # WKB without the SRID, when the target has no PostGIS (docs/connectors/mysql.md, "Type mapping")
    # MySQL TIME spans -838:59:59..838:59:59; PostgreSQL's time cannot, interval holds every value.
    Kind.TIME: "interval",
}


def kind_to_postgres(column: Column) -> str:
    """The PostgreSQL type of a column from another engine, from its logical kind (and size, precision, scale): a
    native declaration is used only between two PostgreSQL servers."""
    kind = column.kind
    if kind == Kind.INT:
        bits = (column.bits or 64) + (1 if column.unsigned else 0)  # unsigned needs one more bit signed
        return "smallint" if bits <= 16 else "integer" if bits <= 32 else "bigint"
    if kind == Kind.DECIMAL:
        return f"numeric({column.precision},{column.scale})"
    if kind == Kind.STRING:
        # MySQL returns CHAR(n) without trailing spaces; varchar(n) keeps the value as MySQL returns it.
        # CHAR(0)/VARCHAR(0) hold only '' (and NULL): PostgreSQL has no varchar(0), text holds that exactly.
        sized = column.native.startswith(("char", "varchar")) and column.length
        return f"varchar({column.length})" if sized else "text"
    if kind in (Kind.DATETIME, Kind.TIMESTAMP):
        base = "timestamp" if kind == Kind.DATETIME else "timestamptz"
        return f"{base}({column.precision or 0})"
    if kind == Kind.BIT:
        return f"bit({column.length})"
    return _FROM_MYSQL[kind]


def unconstrained_types(cursor, table_sql: str) -> dict[str, str]:
    """Each column of the target table's type without its length, precision or scale (bit(n) keeps its length:
    only a cast to bit(n) makes an int a bit string). Without a typmod `character` and `bit` mean length 1:
    bpchar is character's unconstrained name."""
    cursor.execute("SELECT attname, CASE WHEN atttypid IN ('bpchar'::regtype, '_bpchar'::regtype) "
                   "THEN replace(format_type(atttypid, NULL), 'character', 'bpchar') ELSE format_type(atttypid, "
                   "CASE WHEN atttypid IN ('bit'::regtype, '_bit'::regtype) THEN atttypmod END) END "
                   "FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped", (table_sql,))
    return dict(cursor.fetchall())
