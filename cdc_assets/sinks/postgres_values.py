"""Log values as the parameters a PostgreSQL target's statements take, so that the log writes what the snapshot's
COPY text writes: MySQL geometry as WKB (or PostGIS's EWKB text), floats and Decimal infinities as their exact
text; and MySQL text holding NUL, which no PostgreSQL text can, refused by name."""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.tables import Kind, TableSchema
from cdc_assets.errors import NulInText


def refuse_nul(schema: TableSchema, changes: TableChanges) -> None:
    """MySQL text may hold NUL (0x00), PostgreSQL text cannot: stop naming the row (docs/connectors/mysql.md, "Type mapping")."""
    for key, row in (*changes.rows.items(), *changes.partial.items()):
        for name, value in row.items():
            if isinstance(value, str) and "\0" in value:
                raise NulInText(schema.table, key, name)


def log_values(schema: TableSchema, types: dict[str, str]) -> Callable[[str, Any], Any]:
    """(column, log value) -> the parameter the snapshot's COPY text matches: MySQL geometry (the binlog carries
    MySQL's form: a 4-byte little-endian SRID, then WKB) as its WKB, or for PostGIS as 'SRID=n;<hex WKB>'; floats as
    `param` renders them."""
    geometry = {c.name for c in schema.columns if c.kind == Kind.GEOMETRY}

    def converted(name: str, value: Any) -> Any:
        if name not in geometry or value is None:
            return param(value)
        if types[name] == "geometry":
            return f"SRID={int.from_bytes(value[:4], 'little')};{value[4:].hex()}"
        return value[4:]
    return converted


def param(value):
    """A float as its shortest exact text: psycopg2 renders -0.0 as the numeric literal -0.0, whose sign the
    cast to real/double then loses (numeric has no negative zero). A Decimal infinity as its text: psycopg2
    renders every non-finite Decimal as 'NaN'."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal) and value.is_infinite():
        return str(value)
    return value
