"""Split-key values: canonical JSON form, and SQL literals for the range predicates Spark sends.

Ints stay ints. Every other key kind travels as text: ISO dates, `str(Decimal)`, UUID text, and hex
for binary keys. Comparisons always run in the source database, so its collation decides order.
"""
from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

from cdc_assets.core.splits import KeyRange, KeyValue
from cdc_assets.core.tables import Column, Kind

_KEY_KINDS = {
    Kind.INT: "int", Kind.UINT64: "decimal", Kind.DECIMAL: "decimal", Kind.STRING: "string", Kind.ENUM: "string",
    Kind.UUID: "uuid", Kind.DATE: "date", Kind.DATETIME: "datetime", Kind.TIMESTAMP: "datetime",
    Kind.BINARY: "binary", Kind.YEAR: "int",
}


def key_kind(column: Column) -> str | None:
    """The key kind of a split column, or None when the column cannot be split on."""
    return _KEY_KINDS.get(column.kind)


def to_key_value(value: object, kind: str) -> KeyValue:
    if kind == "int":
        return int(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, Decimal, uuid.UUID)):
        return str(value)
    return str(value)


def to_param(value: KeyValue, kind: str) -> object:
    """A DBAPI bind parameter for a key value (both drivers coerce text to the column's type)."""
    return bytes.fromhex(value) if kind == "binary" else value


def literal(value: KeyValue, kind: str, dialect: str) -> str:
    if kind == "int":
        return str(int(value))
    if kind == "decimal":
        return str(Decimal(value))  # re-parsed: only digits, sign, point and exponent get through
    if kind == "binary":
        return f"X'{bytes.fromhex(value).hex()}'" if dialect == "mysql" else f"'\\x{bytes.fromhex(value).hex()}'::bytea"
    text = str(value).replace("'", "''")
    if dialect == "mysql":
        # Our MySQL sessions clear NO_BACKSLASH_ESCAPES, so a backslash must be doubled.
        text = text.replace("\\", "\\\\")
    return f"'{text}'"


def range_predicate(column_sql: str, key_range: KeyRange, kind: str, dialect: str) -> str:
    parts = []
    if key_range.start is not None:
        parts.append(f"{column_sql} >= {literal(key_range.start, kind, dialect)}")
    if key_range.end is not None:
        parts.append(f"{column_sql} < {literal(key_range.end, kind, dialect)}")
    return " AND ".join(parts) or "1=1"


_SAME_ORDER_EVERYWHERE = ("int", "decimal", "date", "binary")


def order_agrees(kind: str, source_dialect: str, target_dialect: str) -> bool:
    """Does the target order split keys of this kind exactly as the source does, so that it can judge a split's
    range itself? Not for text (collations differ in case, accents, trailing spaces), nor MariaDB's UUID type
    (it sorts its bytes in an order of its own), nor PostgreSQL instants in a MySQL target (their literals carry
    an offset MySQL does not parse)."""
    if kind in _SAME_ORDER_EVERYWHERE:
        return True
    if kind == "uuid":
        return source_dialect == "postgres"
    if kind == "datetime":
        return not (source_dialect == "postgres" and target_dialect == "mysql")
    return False
