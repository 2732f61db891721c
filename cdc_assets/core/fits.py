"""What a target column can hold, read from the target's catalog (information_schema.columns, which MySQL and
PostgreSQL both have), and whether a source column or a log value fits it without being cut or rounded.

Servers cut or round in places no error shows: PostgreSQL's explicit casts (`CAST('abc' AS varchar(2))` is 'ab')
and its assignment of a numeric or a timestamp to a column of a smaller scale or precision (12.345 into
numeric(10,2) is 12.35, 12.34 into integer is 12); MySQL, even in strict mode, rounds the same way. The engine
therefore checks values only where the target column does not hold every value of the source column
(`holds`): a column the user narrowed, a retyped source column, a lossy type mapping. Where it holds, the log's
values fit by construction (the source column's declaration bounds them) and no value is looked at.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import Enum
from typing import Any

from cdc_assets.core.tables import Column, Kind


class Family(str, Enum):
    TEXT = "text"  # char/varchar: `limit` characters
    INT = "int"  # `low`..`high`
    DECIMAL = "decimal"  # `limit` digits of which `scale` after the point; limit None: any
    TEMPORAL = "temporal"  # `scale` fractional digits of a second
    BIT = "bit"  # `limit` bits
    OTHER = "other"  # checked by the server alone (a too long TEXT, a float out of range: errors, never cuts)


@dataclass(frozen=True)
class Capacity:
    family: Family
    type_text: str  # the catalog's name of the type, for messages
    limit: int | None = None
    scale: int = 0
    low: int = 0
    high: int = 0


_INT_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}
_TEMPORAL = ("timestamp", "datetime", "time", "interval")


def capacity(data_type: str, char_length: int | None, precision: int | None, scale: int | None,
             fraction: int | None, column_type: str | None = None) -> Capacity:
    """From an information_schema.columns row (DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION,
    NUMERIC_SCALE, DATETIME_PRECISION, and MySQL's COLUMN_TYPE for `unsigned`)."""
    name = data_type.lower()
    text = column_type or _with_limits(name, char_length, precision, scale, fraction)
    if name in ("character varying", "varchar", "character", "char"):
        return Capacity(Family.TEXT, text, char_length)
    if name in _INT_BITS:
        bits = _INT_BITS[name]
        if column_type and "unsigned" in column_type.lower():
            return Capacity(Family.INT, text, low=0, high=2 ** bits - 1)
        return Capacity(Family.INT, text, low=-(2 ** (bits - 1)), high=2 ** (bits - 1) - 1)
    if name in ("numeric", "decimal"):
        return Capacity(Family.DECIMAL, text, precision, scale or 0)
    if name.startswith(_TEMPORAL):
        return Capacity(Family.TEMPORAL, text, scale=6 if fraction is None else fraction)
    if name in ("bit", "bit varying"):
        # MySQL gives BIT(n)'s n as its numeric precision, PostgreSQL as its character length.
        return Capacity(Family.BIT, text, char_length if char_length is not None else precision)
    return Capacity(Family.OTHER, text)


def _with_limits(name: str, char_length: int | None, precision: int | None, scale: int | None,
                 fraction: int | None) -> str:
    if name in ("numeric", "decimal") and precision is not None:
        return f"{name}({precision},{scale or 0})"
    if name.startswith(_TEMPORAL):
        first, _, rest = name.partition(" ")  # timestamp(3) with time zone
        return name if fraction is None else f"{first}({fraction}) {rest}".rstrip()
    return name if char_length is None else f"{name}({char_length})"


def holds(cap: Capacity | None, column: Column) -> bool:
    """Whether every value the source column can hold fits `cap` unchanged: then no value needs a look."""
    if cap is None or cap.family is Family.OTHER:
        return True
    kind, family = column.kind, cap.family
    if family is Family.TEXT:
        return cap.limit is None or (kind == Kind.STRING and column.length is not None and column.length <= cap.limit)
    whole = kind in (Kind.INT, Kind.UINT64)
    if family is Family.INT:
        if kind == Kind.BOOL:
            return cap.low <= 0 and cap.high >= 1
        if kind == Kind.YEAR:
            return cap.low <= 0 and cap.high >= 9999
        return whole and cap.low <= _int_low(column) and _int_high(column) <= cap.high
    if family is Family.DECIMAL:
        if cap.limit is None:
            return whole or kind == Kind.DECIMAL
        if whole:
            digits = cap.limit - cap.scale
            return len(str(_int_high(column))) <= digits and len(str(-_int_low(column))) <= digits
        return (kind == Kind.DECIMAL and column.precision is not None and (column.scale or 0) <= cap.scale
                and column.precision - (column.scale or 0) <= cap.limit - cap.scale)
    if family is Family.TEMPORAL:
        return (kind in (Kind.DATETIME, Kind.TIMESTAMP, Kind.TIME, Kind.INTERVAL, Kind.DATE)
                and (6 if column.precision is None else column.precision) <= cap.scale)
    return kind == Kind.BIT and cap.limit is not None and column.length is not None and column.length <= cap.limit


def narrower(columns, capacities: dict[str, Capacity | None]) -> list[Column]:
    """Those of `columns` whose target column (`capacities`, by name) does not hold every value they can have: the
    ones a re-plan alters and a failed commit names. A type this module does not model is left to the server."""
    return [c for c in columns if (cap := capacities.get(c.name)) is not None and cap.family is not Family.OTHER
            and not holds(cap, c)]


def _int_high(column: Column) -> int:
    bits = column.bits or 64
    return 2 ** bits - 1 if column.unsigned or column.kind == Kind.UINT64 else 2 ** (bits - 1) - 1


def _int_low(column: Column) -> int:
    return 0 if column.unsigned or column.kind == Kind.UINT64 else -(2 ** ((column.bits or 64) - 1))


_FRACTION = re.compile(r"[:\d]\.(\d+)")  # a second's fraction in a temporal text: '12:00:00.250', '1 day 00:00:01.5'


def fits(cap: Capacity, value: Any) -> bool:
    """Whether the target stores `value` (a log value: Python's or, between two PostgreSQL servers, the source's
    text of it) as it is. NULL, and values the server refuses with an error of its own (NaN into MySQL), fit."""
    if value is None or cap.family is Family.OTHER:
        return True
    try:
        if cap.family is Family.TEXT:
            return cap.limit is None or len(value if isinstance(value, str) else str(value)) <= cap.limit
        if cap.family is Family.INT:
            if isinstance(value, (bool, int)):
                return cap.low <= value <= cap.high
            number = _decimal(value)
            return not number.is_finite() or (not _cut(number, 0) and cap.low <= number <= cap.high)
        if cap.family is Family.DECIMAL:
            number = _decimal(value)
            if cap.limit is None or not number.is_finite():
                return True
            return not _cut(number, cap.scale) and abs(number) < Decimal(10) ** (cap.limit - cap.scale)
        if cap.family is Family.TEMPORAL:
            return _fraction_fits(value, cap.scale)
        if cap.family is Family.BIT:
            if isinstance(value, int):
                return cap.limit is None or value < 2 ** cap.limit
            return cap.limit is None or len(value) <= cap.limit
    except (InvalidOperation, TypeError, ValueError):
        return False
    return True


def _decimal(value: Any) -> Decimal:
    if isinstance(value, Decimal):
        return value
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(str(value).strip())


def _cut(number: Decimal, scale: int) -> bool:
    """Whether `number` has a non-zero digit after its `scale`-th fractional digit (exact, whatever its size)."""
    _, digits, exponent = number.as_tuple()
    extra = -exponent - scale
    return extra > 0 and any(digits[-extra:])


def _fraction_fits(value: Any, digits: int) -> bool:
    if digits >= 6 and not isinstance(value, str):
        return True
    if isinstance(value, (dt.datetime, dt.time)):
        return value.microsecond % 10 ** (6 - digits) == 0
    if isinstance(value, dt.timedelta):
        return value.microseconds % 10 ** (6 - digits) == 0
    if isinstance(value, str):
        found = _FRACTION.search(value)
        return found is None or not found.group(1)[digits:].strip("0")
    return True
