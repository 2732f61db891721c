"""A row of the engine's Python values as one PostgreSQL COPY text line, rendered in Python (a MongoDB source has no
SQL to render it, as the relational sources do).

COPY's text format ("File Formats", https://www.postgresql.org/docs/current/sql-copy.html): fields separated by a
tab, `\\N` for NULL, and inside a field a backslash, newline, carriage return and tab written as `\\\\`, `\\n`,
`\\r`, `\\t`. Each value is written in the form PostgreSQL's input function reads back exactly:

    bool      t / f                  int        decimal digits
    Decimal   plain digits, never an exponent rounded by a context (format "f" is exact)
    float     repr(): the shortest text that reads back as the same double; Infinity, -Infinity, NaN
    bytes     bytea hex, \\x... (its backslash doubled by COPY's escaping)
    datetime  ISO 8601 with microseconds and +00: BSON dates are UTC instants; a timestamp column ignores the zone
    date      ISO 8601
    str       UUID text, JSON text and strings alike, escaped

NUL (U+0000) has no place in a PostgreSQL text value (its input functions stop at it, or refuse it): a string
holding one is refused with the document and field named, as is JSON text holding the escape \\u0000, which
jsonb refuses.
"""
from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal

from cdc_assets.core.copy_text import NULL, SEPARATOR, escape
from cdc_assets.core.tables import Column, Kind, TableId
from cdc_assets.errors import TableError

_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")  # \u0000 not itself escaped


class NotRenderable(TableError):
    """A document value the COPY line cannot carry exactly. Way out: declare the field `json`, or leave it out with
    `source.exclude_columns` (docs/connectors/mongodb.md)."""


def line(split_index: int, row: dict, columns: tuple[Column, ...], table: TableId, key: object) -> str:
    """The COPY text line of one row: its split index, then its columns in order. `key` names the row in errors."""
    return SEPARATOR.join([str(split_index), *(field(row.get(c.name), c, table, key) for c in columns)])


def field(value: object, column: Column, table: TableId, key: object) -> str:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise NotRenderable(f"document {key} of {table}: field '{column.name}' holds {value}",
                                "a numeric column holds finite numbers only: declare the field json")
        return format(value, "f")
    if isinstance(value, float):
        return _double(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\\\x" + bytes(value).hex()
    if isinstance(value, dt.datetime):
        return _utc(value).isoformat(sep=" ", timespec="microseconds") + "+00"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        return _text(value, column, table, key)
    raise NotRenderable(f"document {key} of {table}: field '{column.name}' holds a {type(value).__name__}, which "
                        "no COPY text rendering is written for", "declare the field json")


def _double(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def _utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def _text(value: str, column: Column, table: TableId, key: object) -> str:
    if "\x00" in value:
        raise NotRenderable(f"document {key} of {table}: field '{column.name}' holds a NUL character (U+0000), "
                            "which PostgreSQL text cannot store", "remove it on the source, or leave the field out "
                            "with source.exclude_columns")
    if column.kind is Kind.JSON and _JSON_NUL.search(value):
        raise NotRenderable(
            f"document {key} of {table}: field '{column.name}' holds the character U+0000 inside JSON, which a "
            "PostgreSQL jsonb column refuses", "remove it on the source, or leave the field out with "
            "source.exclude_columns")
    return escape(value)
