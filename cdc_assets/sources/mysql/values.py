"""Binlog values as the snapshot reads them: what pymysqlreplication decodes -> the snapshot's value, per column
kind, and row images normalised to the described columns."""
from __future__ import annotations

import uuid
from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from typing import Any

from pymysqlreplication.constants import NONE_SOURCE

from cdc_assets.core.tables import Column, Kind, TableSchema
from cdc_assets.sources.mysql.json_text import json_text
from cdc_assets.sources.mysql.zero_dates import LIBRARY_OUT_OF_RANGE, ZERO_DATE

Converter = Callable[[Any], Any]

_ZERO_TIMESTAMP = datetime(1970, 1, 1)  # TIMESTAMP '0000-00-00 00:00:00' is stored as epoch 0
_ZERO_YEAR = 1900  # YEAR 0000 is stored as 0 and decoded as 1900 + 0; real years start at 1901


def _binary(fixed_length: int | None) -> Converter:
    def convert(value: Any) -> bytes:
        # An empty value of a binary-charset column is decoded to '' (the library "decodes" with
        # charset 'binary', which Python only skips for empty input).
        raw = value.encode() if isinstance(value, str) else value
        # The binlog strips trailing 0x00 from BINARY(n); the column returns them.
        return raw.ljust(fixed_length, b"\0") if fixed_length else raw
    return convert


def _set_text(column: Column) -> Converter:
    # Labels described with their charset are exact (types.labels); before, they kept COLUMN_TYPE's doubled quotes.
    order = list(column.values) if column.charset else [m.replace("''", "'") for m in column.values]

    def convert(value: set) -> str:
        text = [m for m in order if m in value]
        return ",".join(text + sorted(value.difference(order)))
    return convert


_SECOND = timedelta(seconds=1)


def _time2(value: timedelta) -> timedelta:
    """Undo the library's misreading of a negative TIME(n>0) with a fraction.

    TIME2 stores a negative value -(S + f) as integer part -(S + 1) and fraction 1 - f (sql-common/my_time.cc
    my_time_packed_from_binary); pymysqlreplication negates the two parts separately and returns -(S + 1 - f):
    -00:00:01.10 comes back as -00:00:01.90. Its magnitude M = S + (1 - f) with 0 < 1 - f < 1 gives
    S = floor(M) and f = 1 - frac(M). Whole negative values and positive ones are read right."""
    if value >= timedelta(0):
        return value
    magnitude = -value
    fraction = timedelta(microseconds=magnitude.microseconds)
    if not fraction:
        return value
    return -(magnitude - fraction + (_SECOND - fraction))


def _uuid_text(value: Any) -> str:
    raw = value.encode() if isinstance(value, str) else value  # trailing zero bytes stripped, as for BINARY
    return str(uuid.UUID(bytes=raw.ljust(16, b"\0")))


def _time_text(precision: int) -> Converter:
    """TIME as `CAST(col AS CHAR)` prints it ('838:59:59.000000', '-00:00:01.500000' for TIME(6)): a
    PostgreSQL interval parses that text to hours, where a timedelta would arrive as '34 days 22:59:59'."""
    def convert(value: timedelta) -> str:
        value = _time2(value) if precision else value
        micros = abs(value) // timedelta(microseconds=1)
        seconds, fraction = divmod(micros, 1_000_000)
        hours, rest = divmod(seconds, 3600)
        text = f"{'-' if value < timedelta(0) else ''}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
        return f"{text}.{fraction:06d}"[:len(text) + 1 + precision] if precision else text
    return convert


def _timestamp(value: datetime) -> datetime:
    return ZERO_DATE if value == _ZERO_TIMESTAMP else value


def converter(column: Column) -> Converter | None:
    """How a non-NULL binlog value of `column` becomes the snapshot's value; None when it already is."""
    kind = column.kind
    if kind == Kind.BIT:
        width = column.length or 1
        return lambda v: v.zfill(width)
    if kind == Kind.BINARY:
        return _binary(column.length if column.native.startswith("binary") else None)
    if kind == Kind.JSON:
        return json_text
    if kind == Kind.SET:
        return _set_text(column)
    if kind == Kind.TIMESTAMP:
        # Decoded as a naive datetime in UTC, like the snapshot's UTC session renders it.
        return _timestamp
    if kind == Kind.YEAR:
        return lambda v: 0 if v == _ZERO_YEAR else v
    if kind == Kind.UUID:
        return _uuid_text
    if kind == Kind.TIME:
        return _time_text(column.precision or 0)
    return None  # ints, DECIMAL, floats, strings, DATE/DATETIME (zero dates already ZERO_DATE)


def converters(schema: TableSchema) -> dict[str, Converter]:
    return {c.name: conv for c in schema.columns if (conv := converter(c)) is not None}


def described(values: dict, names: Collection[str]) -> dict:
    """Only the columns in `names`, the described table's: a column the server logs that the task does not
    carry (a functional index's hidden column, one added since the schema was read, an excluded one) never
    reaches the target. Names come from binlog_row_metadata=FULL, so no value moves to another column."""
    return {name: value for name, value in values.items() if name in names}


def normalise_image(values: dict, none_sources: dict, convs: dict[str, Converter]) -> dict:
    """Normalise one row image in place and return it. Columns the image does not carry (a session's
    binlog_row_image MINIMAL or NOBLOB) are dropped: their values are unknown, not NULL."""
    for name, source in none_sources.items():
        if source == NONE_SOURCE.COLS_BITMAP:
            del values[name]
        elif source in LIBRARY_OUT_OF_RANGE and name in values:
            values[name] = ZERO_DATE  # a zero date the library made None, as row_decoder makes it ZERO_DATE
    for name, convert in convs.items():
        value = values.get(name)
        if value is not None:
            values[name] = convert(value)
        elif none_sources.get(name) == NONE_SOURCE.EMPTY_SET:
            values[name] = ""  # the library reports an empty SET as None
    return values
