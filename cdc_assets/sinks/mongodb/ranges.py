"""Which documents a group of splits covers: the splits' key ranges as a filter on `_id` (or the split column
inside a composite `_id`), with bounds in the BSON form `documents` gives the same keys.

Only meaningful where BSON orders the key kind exactly as the source does (`order_agrees`); elsewhere the filter
still says what BSON holds in the ranges by its own order (the candidates `unstaged_keys` checks).
"""
from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

from cdc_assets.core.splits import KeyRange, KeyValue
from cdc_assets.core.tables import TableSchema
from cdc_assets.sinks.mongodb.documents import ID, DocumentValueError, bson_value

# Key kind -> (source db_type -> BSON orders it as that source does). Conservative: True only where the order is
# the same for every value the source can hold under that kind.
#  int      int32/int64 compare by value, as both sources do
#  decimal  Decimal128 by value; PostgreSQL's numeric NaN sorts above every number, BSON's below: MySQL only
#  date     a date at 00:00 UTC, ordered as the day
#  datetime MySQL's DATETIME/TIMESTAMP (no sub-millisecond digits, or the row is refused) order as BSON dates;
#           PostgreSQL's ±infinity sorts at the ends there and has no BSON date: not for PostgreSQL
#  uuid     BinData subtype 4 compares its 16 bytes as PostgreSQL's uuid does; MariaDB's UUID type sorts its own way
#  binary   BSON orders BinData by length first, then subtype, then bytes: never the SQL byte order
#  string   BSON compares UTF-8 bytes, the sources by collation (case, accents, trailing spaces): never
_ORDER_AGREES = {
    "int": ("mysql", "postgres"), "decimal": ("mysql",), "date": ("mysql", "postgres"), "datetime": ("mysql",),
    "uuid": ("postgres",), "binary": (), "string": (),
}


def order_agrees(kind: str, source_db_type: str) -> bool:
    return source_db_type in _ORDER_AGREES.get(kind, ())


def split_field(schema: TableSchema) -> str:
    """Where the split column's value sits in a target document."""
    return ID if len(schema.primary_key) == 1 else f"{ID}.{schema.split_column.name}"


def bound(schema: TableSchema, value: KeyValue, kind: str) -> object:
    """A range bound (its canonical JSON form, `core.keys.to_key_value`) as the BSON value of the split column.
    A bound no document can have (MySQL's zero date, PostgreSQL's infinity) is refused as its rows are."""
    column = schema.split_column
    try:
        return bson_value(column, _parsed(value, kind), schema)
    except (ValueError, DocumentValueError) as exc:
        reason = exc.message if isinstance(exc, DocumentValueError) else str(exc)
        raise DocumentValueError(
            f"split bound {value!r} of {schema.table} on '{column.name}' ({column.native}) has no BSON form "
            f"({reason})",
            "change or delete the rows holding that key on the source, then plan again (cdc-assets plan --replan)"
        ) from None


def _parsed(value: KeyValue, kind: str) -> object:
    if kind == "decimal":
        return Decimal(str(value))
    if kind == "date":
        return dt.date.fromisoformat(str(value))
    if kind == "datetime":
        return dt.datetime.fromisoformat(str(value))
    if kind == "uuid":
        return uuid.UUID(str(value))
    if kind == "binary":
        return bytes.fromhex(str(value))
    return value


def range_filter(schema: TableSchema, ranges: tuple[KeyRange, ...], kind: str) -> dict:
    """A filter matching the documents whose split column lies in any of `ranges` ([start, end), open ends)."""
    where = split_field(schema)
    clauses = []
    for r in ranges:
        condition = {}
        if r.start is not None:
            condition["$gte"] = bound(schema, r.start, kind)
        if r.end is not None:
            condition["$lt"] = bound(schema, r.end, kind)
        if not condition:
            return {}  # one range covers the whole key space
        clauses.append({where: condition})
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}
