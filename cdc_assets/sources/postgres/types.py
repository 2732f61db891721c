"""PostgreSQL column declarations (pg_attribute + format_type) -> logical columns, and how each travels
in the snapshot read.
"""
from __future__ import annotations

import re

from cdc_assets.core.tables import Column, Kind

_BY_NAME = {
    "boolean": Kind.BOOL, "smallint": Kind.INT, "integer": Kind.INT, "bigint": Kind.INT,
    "real": Kind.FLOAT32, "double precision": Kind.FLOAT64, "text": Kind.STRING, "character varying": Kind.STRING,
    "character": Kind.STRING, "bytea": Kind.BINARY, "date": Kind.DATE, "timestamp without time zone": Kind.DATETIME,
    "timestamp with time zone": Kind.TIMESTAMP, "time without time zone": Kind.TIME, "interval": Kind.INTERVAL,
    "json": Kind.JSON, "jsonb": Kind.JSON, "uuid": Kind.UUID, "bit": Kind.BIT, "bit varying": Kind.BIT,
    "numeric": Kind.DECIMAL,
}
# Types whose text form is exact and that psycopg2 leaves as text in the log: PostgreSQL targets declare them as
# the source does, MySQL targets hold their text. Any other type is refused at plan time (engine/columns.py).
_AS_TEXT = {"money", "inet", "cidr", "macaddr", "macaddr8", "tsvector", "xml", "hstore",
            "int4range", "int8range", "numrange", "tsrange", "tstzrange", "daterange",
            "geometry", "geography"}  # PostGIS: hex EWKB, the SRID inside
_BITS = {"smallint": 16, "integer": 32, "bigint": 64}
_TYPMOD = re.compile(r"\(([\d, ]+)\)")
NATIVE_KINDS = {Kind.BOOL, Kind.INT, Kind.FLOAT32, Kind.FLOAT64, Kind.STRING, Kind.BINARY}


def column_from_catalog(name: str, native: str, not_null: bool, type_category: str) -> Column:
    """`native` is format_type(atttypid, atttypmod), e.g. 'numeric(65,30)', 'timestamp(6) with time zone'."""
    # PostGIS typmods name a subtype and an SRID: geometry(Point,4326).
    postgis = native.startswith(("geometry", "geography"))
    base = native.split("(")[0].strip() if postgis else _TYPMOD.sub("", native).strip()
    mods = [int(x) for x in _TYPMOD.search(native).group(1).split(",")] if _TYPMOD.search(native) else []
    common = dict(name=name, native=native, nullable=not not_null)
    if native.endswith("[]"):
        # The log reads arrays through psycopg2's casters, which know the element types mapped here only.
        known = _TYPMOD.sub("", native[:-2]).strip() in _BY_NAME
        return Column(kind=Kind.ARRAY if known else Kind.UNKNOWN, element=native[:-2], **common)
    if type_category == "E":
        return Column(kind=Kind.ENUM, **common)
    kind = _BY_NAME.get(base, Kind.OTHER if base in _AS_TEXT else Kind.UNKNOWN)
    if kind == Kind.INT:
        return Column(kind=kind, bits=_BITS[base], **common)
    if kind == Kind.DECIMAL:
        precision, scale = (mods + [0])[:2] if mods else (None, None)
        return Column(kind=kind, precision=precision, scale=scale, **common)
    if kind in (Kind.DATETIME, Kind.TIMESTAMP, Kind.TIME):
        return Column(kind=kind, precision=mods[0] if mods else 6, **common)
    if kind in (Kind.STRING, Kind.BIT):
        return Column(kind=kind, length=mods[0] if mods else None, **common)
    return Column(kind=kind, **common)


def select_expr(column: Column, quoted: str, target_dialect: str) -> tuple[str, bool]:
    if column.kind == Kind.FLOAT32:
        return f"{quoted}::float8", False  # the exact single-precision value, as MySQL's FLOAT path needs
    if column.kind in NATIVE_KINDS:
        return quoted, False
    if column.kind == Kind.DECIMAL and column.precision is not None and column.precision <= 38:
        return quoted, False
    if column.kind == Kind.TIMESTAMP:
        # An instant, rendered as its UTC wall clock: both targets parse it in a UTC session. to_char renders
        # ±infinity as NULL: those go as their text, which a MySQL target refuses, as it refuses them in the log.
        return (f"CASE WHEN isfinite({quoted}) THEN to_char({quoted} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') "
                f"ELSE {quoted}::text END"), True
    if column.native == "inet":
        return f"abbrev({quoted})", True  # the output function's text ('::1'); the cast to text adds '/128'
    if column.kind == Kind.ARRAY and target_dialect in ("mysql", "mongo"):
        # MySQL has no arrays, and a MongoDB target parses no array literal: a JSON array keeps every element.
        return f"to_json({quoted})::text", True
    return f"{quoted}::text", True


def compared_expr(column: Column, quoted: str) -> str:
    """A column as verification compares it with a PostgreSQL target: JSON as its text, as the target's range read
    takes it (sinks/range_read.py); psycopg2 would parse it, and a parsed JSON string is no longer told apart
    from JSON text."""
    return f"{quoted}::text" if column.kind == Kind.JSON else quoted


def compared_for_mysql(column: Column, quoted: str) -> str:
    """A column as verification compares it with a MySQL target: as the snapshot renders it for one; a float's
    zero without its sign, since MySQL stores -0 as 0 (a target cannot hold what the comparison would miss); a
    char(n) without its pad spaces, which MySQL's CHAR hands back without (the cast to text drops them)."""
    if column.kind in (Kind.FLOAT32, Kind.FLOAT64):
        return f"CASE WHEN {quoted} = 0 THEN 0::float8 ELSE {quoted}::float8 END"
    if column.kind == Kind.STRING and _TYPMOD.sub("", column.native).strip() in ("character", "bpchar"):
        return f"{quoted}::text"
    return select_expr(column, quoted, "mysql")[0]


# PostgreSQL COPY text format: fields split by TAB, NULL is \N, and backslash, TAB, LF, CR are escaped; BS, VT
# and FF too, as `COPY ... TO` escapes them, so a line is the same bytes whichever renders it (CopyOutExport).
_ESCAPED = (r"replace(replace(replace(replace(replace(replace(replace({x}, '\', '\\'), chr(9), '\t'), chr(10), '\n'), "
            r"chr(13), '\r'), chr(8), '\b'), chr(11), '\v'), chr(12), '\f')")


def copy_field(column: Column, quoted: str, escaped: bool = True) -> str:
    """SQL rendering one column as a COPY text field; PostgreSQL's own output functions are exact. `escaped`
    False: the field's text before COPY's escapes, for a `COPY ... TO` that adds them itself (the same bytes)."""
    kind = column.kind
    if kind in (Kind.INT, Kind.DECIMAL, Kind.FLOAT32, Kind.FLOAT64, Kind.BOOL, Kind.DATE, Kind.DATETIME,
                Kind.TIMESTAMP, Kind.TIME, Kind.BIT, Kind.UUID):
        return f"{quoted}::text"
    if kind == Kind.BINARY:
        return (r"'\\x'" if escaped else r"'\x'") + f" || encode({quoted}, 'hex')"
    return _ESCAPED.format(x=f"{quoted}::text") if escaped else f"{quoted}::text"


def copy_line(fields: list[str]) -> str:
    return "concat_ws(chr(9), " + ", ".join(f"coalesce({f}, '\\N')" for f in fields) + ")"
