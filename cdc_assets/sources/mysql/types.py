"""MySQL/MariaDB column declarations (information_schema.COLUMNS) -> logical columns, and how each
column travels in the snapshot read: natively through Spark, or as canonical text that the target parses.
"""
from __future__ import annotations

import re

from cdc_assets.core.tables import Column, Kind
from cdc_assets.sources.mysql import charsets

_INTS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}
_SIMPLE = {
    "float": Kind.FLOAT32, "double": Kind.FLOAT64, "real": Kind.FLOAT64,
    "char": Kind.STRING, "varchar": Kind.STRING, "tinytext": Kind.STRING, "text": Kind.STRING,
    "mediumtext": Kind.STRING, "longtext": Kind.STRING,
    "binary": Kind.BINARY, "varbinary": Kind.BINARY, "tinyblob": Kind.BINARY, "blob": Kind.BINARY,
    "mediumblob": Kind.BINARY, "longblob": Kind.BINARY,
    "date": Kind.DATE, "datetime": Kind.DATETIME, "timestamp": Kind.TIMESTAMP, "time": Kind.TIME,
    "year": Kind.YEAR, "json": Kind.JSON, "enum": Kind.ENUM, "set": Kind.SET, "bit": Kind.BIT,
    "uuid": Kind.UUID,  # MariaDB >= 10.7
    **{t: Kind.GEOMETRY for t in ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
                                  "multipolygon", "geometrycollection")},
}
# Spark's JDBC types carry these exactly; everything else travels as text.
NATIVE_KINDS = {Kind.INT, Kind.UINT64, Kind.FLOAT32, Kind.FLOAT64, Kind.STRING, Kind.BINARY}


def column_from_catalog(row: dict, json_columns: set[str]) -> Column:
    """`row` holds COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_MAXIMUM_LENGTH,
    NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, COLLATION_NAME, CHARACTER_SET_NAME (lower-cased keys).
    A text column in a charset the binlog reader cannot decode exactly (charsets.py) is of no kind: refused."""
    name, data_type, native = row["column_name"], row["data_type"].lower(), row["column_type"].lower()
    unsigned = "unsigned" in native
    common = dict(name=name, native=native, nullable=row["is_nullable"] == "YES")
    if data_type in _INTS:
        bits = _INTS[data_type]
        kind = Kind.UINT64 if bits == 64 and unsigned else Kind.INT
        return Column(kind=kind, bits=bits, unsigned=unsigned, **common)
    if data_type == "decimal":
        return Column(kind=Kind.DECIMAL, precision=int(row["numeric_precision"]), scale=int(row["numeric_scale"]),
                      unsigned=unsigned, **common)
    if data_type == "longtext" and name in json_columns:
        # MariaDB stores JSON as LONGTEXT guarded by CHECK (json_valid(col)).
        return Column(kind=Kind.JSON, **common)
    kind = _SIMPLE.get(data_type, Kind.UNKNOWN)  # refused at plan time (engine/columns.py)
    if kind in (Kind.ENUM, Kind.SET):
        # Declared with its labels' case: a MySQL target's ENUM/SET takes the declaration (and keeps only its labels).
        return Column(kind=kind, values=labels(row["column_type"]), charset=row.get("character_set_name"),
                      **{**common, "native": row["column_type"]})
    if kind == Kind.BIT:
        return Column(kind=kind, length=int(row["numeric_precision"] or 1), **common)
    if kind in (Kind.DATETIME, Kind.TIMESTAMP, Kind.TIME):
        return Column(kind=kind, precision=int(row["datetime_precision"] or 0), **common)
    length = row.get("character_maximum_length")
    if kind != Kind.STRING:
        return Column(kind=kind, length=int(length) if length is not None else None, **common)
    charset = row.get("character_set_name")
    if charsets.unreadable(charset):
        kind = Kind.UNKNOWN  # refused at plan time, naming the charset
    return Column(kind=kind, length=int(length) if length is not None else None, collation=row.get("collation_name"),
                  charset=charset, **common)


_LABEL = re.compile(r"'((?:[^'\\]|''|\\.)*)'", re.S)
_ESCAPE = re.compile(r"''|\\(.)", re.S)
_ESCAPED_CHARS = {"0": "\0", "n": "\n", "r": "\r", "Z": "\x1a"}


def labels(column_type: str) -> tuple[str, ...]:
    """The members of `enum(...)` / `set(...)` as COLUMN_TYPE quotes them (sql_string.cc append_unescaped: a quote
    doubled, backslash, NUL, LF, CR and MySQL's ^Z after a backslash), in their case."""
    return tuple(_ESCAPE.sub(lambda m: _ESCAPED_CHARS.get(m[1], m[1]) if m[1] else "'", label)
                 for label in _LABEL.findall(column_type))


def select_expr(column: Column, quoted: str) -> tuple[str, bool]:
    if column.kind == Kind.FLOAT32:
        # As a double the exact single-precision value travels; as text it is rounded to 7 digits and
        # may overflow FLOAT on the way back in (3.4028235e38 > FLT_MAX).
        return f"CAST({quoted} AS DOUBLE)", False
    if column.kind in NATIVE_KINDS:
        return quoted, False
    if column.kind == Kind.GEOMETRY:
        return f"CAST({quoted} AS BINARY)", False  # SRID + WKB, which a MySQL geometry column takes back
    if column.kind == Kind.DECIMAL and (column.precision or 0) <= 38:
        return quoted, False
    if column.kind == Kind.BIT:
        # BIN() drops leading zeros; pad back to the declared width so '0000000101' survives.
        return f"LPAD(BIN({quoted}), {column.length}, '0')", True
    # Session time_zone is UTC, so TIMESTAMP renders as the UTC wall clock.
    return f"CAST({quoted} AS CHAR)", True


def compared_expr(column: Column, quoted: str) -> str:
    """A column as verification reads it: FLOAT as its exact single-precision value; the server's text of a FLOAT
    has 6 digits (3.40282e38, 16777200), which neither equals the target's value nor shows a change past them."""
    return f"CAST({quoted} AS DOUBLE)" if column.kind == Kind.FLOAT32 else quoted


# PostgreSQL COPY text format: fields split by TAB, NULL is \N, and backslash, TAB, LF, CR are escaped.
_ESCAPED = r"REPLACE(REPLACE(REPLACE(REPLACE({x}, '\\', '\\\\'), '\t', '\\t'), '\n', '\\n'), '\r', '\\r')"
# On MariaDB only a value holding one of them goes through the four REPLACEs: the test is one scan where the
# REPLACEs are four (docs/benchmarks/snapshot.md). Not on
# MySQL 8, whose ICU regular expressions stop at regexp_time_limit: a long text would fail its split.
_ESCAPED_IF_NEEDED = r"IF({x} REGEXP '[\\\\\t\n\r]', " + _ESCAPED + ", {x})"


def copy_field(column: Column, quoted: str, declared: str, mariadb: bool = False) -> str:
    """SQL rendering one column as a PostgreSQL COPY text field (NULL stays NULL); `declared` is its target type,
    `mariadb` whether the server is MariaDB.

    MariaDB prints doubles shortest-exact and DECIMAL exactly; the session runs in UTC."""
    kind = column.kind
    if kind in (Kind.INT, Kind.UINT64, Kind.DECIMAL, Kind.YEAR, Kind.FLOAT64):
        return quoted
    if kind == Kind.FLOAT32:
        return f"CAST({quoted} AS DOUBLE)"  # the exact single-precision value, never a 6-digit rounding
    if kind == Kind.BINARY:
        return rf"CONCAT('\\\\x', HEX({quoted}))"  # bytea hex input, its backslash escaped for COPY
    if kind == Kind.BIT:
        return f"LPAD(BIN({quoted}), {column.length}, '0')"
    if kind == Kind.GEOMETRY and declared == "geometry":
        # PostGIS reads 'SRID=n;' followed by hex WKB: the SRID travels with the value.
        return f"CONCAT('SRID=', ST_SRID({quoted}), ';', HEX(ST_AsBinary({quoted})))"
    if kind == Kind.GEOMETRY:
        return rf"CONCAT('\\\\x', HEX(ST_AsBinary({quoted})))"  # WKB, without MySQL's SRID prefix
    if kind in (Kind.DATE, Kind.DATETIME, Kind.TIMESTAMP, Kind.TIME):
        # MariaDB's CONCAT_WS renders a temporal value as CAST AS CHAR does, byte for byte (zero dates, negative
        # and fractional TIMEs included), without the cast's conversion copy (docs/benchmarks/snapshot.md).
        return quoted if mariadb else f"CAST({quoted} AS CHAR)"
    # Mixed column charsets cannot meet in one CONCAT_WS: everything text becomes utf8mb4 first. On MariaDB a column
    # already in utf8mb4 keeps its bytes, labelled with one collation so that columns of different ones meet:
    # CONVERT copied each value (docs/benchmarks/snapshot.md).
    if mariadb and (column.collation or "").startswith("utf8mb4_"):
        return _ESCAPED_IF_NEEDED.format(x=f"{quoted} COLLATE utf8mb4_bin")
    return (_ESCAPED_IF_NEEDED if mariadb else _ESCAPED).format(x=f"CONVERT({quoted} USING utf8mb4)")


def copy_line(fields: list[str]) -> str:
    return "CONCAT_WS('\\t', " + ", ".join(f"COALESCE({f}, '\\\\N')" for f in fields) + ")"
