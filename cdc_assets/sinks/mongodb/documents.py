"""A row of a SQL table as a MongoDB document: the key becomes `_id`, each value its exact BSON form.

    key column(s)             -> `_id`: the value itself; a composite key a sub-document {k1: v1, k2: v2} in
                                 key order (BSON compares sub-documents field by field, in order)
    INT, YEAR                 -> int32/int64 (pymongo picks by size); beyond int64 refused
    UINT64                    -> Decimal128 (exact up to 2^64-1; an int64 would overflow past 2^63-1)
    DECIMAL                   -> Decimal128, exact; more than 34 significant digits refused
    FLOAT32/64                -> double
    BOOL                      -> bool
    STRING, ENUM, SET, OTHER,
    INTERVAL, TIME            -> string (TIME as its text: MySQL's range exceeds a day, BSON has no time type)
    BINARY, GEOMETRY          -> BinData subtype 0 (GEOMETRY: MySQL's SRID + WKB bytes as read)
    BIT                       -> string of 0/1 digits, as the SQL sources read it
    UUID                      -> BinData subtype 4 (standard)
    DATE                      -> date at 00:00 UTC
    DATETIME, TIMESTAMP       -> date (UTC milliseconds); a value with sub-millisecond digits refused
    JSON                      -> the parsed value (objects, arrays, numbers, strings); integers beyond int64 refused
    ARRAY                     -> array, each element by the rules above for its Python type

Refusals raise `DocumentValueError` naming table, key, column and value: silently rounding would break the
promise that the target holds what the source holds.
"""
from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal, Inexact, InvalidOperation

from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64

from cdc_assets.core.tables import Column, Kind, TableSchema
from cdc_assets.errors import TableError

ID = "_id"
_INT64 = (-(2**63), 2**63 - 1)
_TEXT_KINDS = (Kind.STRING, Kind.ENUM, Kind.SET, Kind.OTHER, Kind.INTERVAL, Kind.TIME, Kind.BIT)


class DocumentValueError(TableError):
    """A SQL value that has no exact BSON form, named with its row and column. Way out: `source.exclude_columns`,
    or change the value on the source (docs/connectors/mongodb-target.md)."""


class _Refused(ValueError):
    pass


def document_id(key: tuple, schema: TableSchema) -> object:
    """`_id` of the row with this key: the single key value, or a sub-document in key order."""
    values = [_value(schema.column(name), value, schema, key) for name, value in zip(schema.primary_key, key)]
    if len(values) == 1:
        return values[0]
    return dict(zip(schema.primary_key, values))


def to_document(row: dict, schema: TableSchema) -> dict:
    """The document of a full row: `_id` first, then every other column (the key columns are in `_id` only).
    A column named `_id` that is not the key would be lost, so it is refused."""
    if ID in row and schema.primary_key != (ID,):
        raise DocumentValueError(f"table {schema.table} has a column named _id that is not its key",
                                 "rename it on the way (source.exclude_columns) or make it the key")
    key = tuple(row[name] for name in schema.primary_key)
    document: dict = {ID: document_id(key, schema)}
    for column in schema.columns:
        if column.name in schema.primary_key or column.name in schema.excluded or column.name not in row:
            continue
        document[column.name] = _value(column, row[column.name], schema, key)
    return document


def key_from_id(value: object, schema: TableSchema) -> tuple:
    """The source key of a document's `_id` (the reverse of `document_id`), in the Python types the sources'
    drivers give, so that the source can be asked whether it still holds it."""
    if len(schema.primary_key) == 1:
        return (_python(schema.column(schema.primary_key[0]).kind, value),)
    return tuple(_python(schema.column(name).kind, value[name]) for name in schema.primary_key)


def _python(kind: Kind, value: object) -> object:
    if isinstance(value, Decimal128):
        number = value.to_decimal()
        return int(number) if kind is Kind.UINT64 else number
    if isinstance(value, Binary):
        return value.as_uuid() if kind is Kind.UUID else bytes(value)
    if kind is Kind.DATE and isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None) if kind is Kind.DATETIME else value.replace(tzinfo=dt.timezone.utc)
    return int(value) if isinstance(value, Int64) else value


def bson_value(column: Column, value: object, schema: TableSchema, key: tuple = ()) -> object:
    """One value in its BSON form (a range bound, a column of a partial row); refusals as for documents."""
    return _value(column, value, schema, key)


def _value(column: Column, value: object, schema: TableSchema, key: tuple) -> object:
    if value is None:
        return None
    try:
        return _convert(column.kind, value)
    except _Refused as exc:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise DocumentValueError(
            f"row {key} of {schema.table}: column '{column.name}' ({column.native}) holds {shown}, which has no "
            f"exact BSON form ({exc})",
            "leave the column out with source.exclude_columns, or change the value on the source") from None


def _convert(kind: Kind, value: object) -> object:  # noqa: PLR0911 - one branch per kind reads best
    if kind in (Kind.INT, Kind.YEAR):
        return _int64(int(value))
    if kind is Kind.UINT64:
        return _decimal128(Decimal(int(value)))
    if kind is Kind.DECIMAL:
        return _decimal128(value if isinstance(value, Decimal) else Decimal(str(value)))
    if kind in (Kind.FLOAT32, Kind.FLOAT64):
        return float(value)
    if kind is Kind.BOOL:
        return bool(value)
    if kind in _TEXT_KINDS:
        return value if isinstance(value, str) else _text(value)
    if kind in (Kind.BINARY, Kind.GEOMETRY):
        return Binary(bytes(value), 0)
    if kind is Kind.UUID:
        return Binary.from_uuid(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
    if kind is Kind.DATE:
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    if kind in (Kind.DATETIME, Kind.TIMESTAMP):
        return _moment(value)
    if kind is Kind.JSON:
        return _json(json.loads(value, parse_float=_json_fraction) if isinstance(value, (str, bytes)) else value)
    if kind is Kind.ARRAY:
        return [_plain(v) for v in value]
    raise _Refused(f"kind {kind.value} has no BSON mapping")


def _int64(number: int) -> int | Int64:
    if not _INT64[0] <= number <= _INT64[1]:
        raise _Refused("beyond a 64-bit integer")
    return Int64(number) if not -(2**31) <= number < 2**31 else number


def _decimal128(number: Decimal) -> Decimal128:
    try:
        return Decimal128(number)  # bson's context traps Inexact and Rounded: never rounds
    except (Inexact, InvalidOperation, ArithmeticError):
        pass
    # DECIMAL(65,30) pads with zeros past Decimal128's 34 digits: dropping zeros keeps the value, not the scale.
    sign, digits, exponent = number.as_tuple()
    while len(digits) > 34 and digits[-1] == 0 and isinstance(exponent, int) and exponent < 0:
        digits, exponent = digits[:-1], exponent + 1
    try:
        return Decimal128(Decimal((sign, digits, exponent)))
    except (Inexact, InvalidOperation, ArithmeticError):
        raise _Refused("more than 34 significant digits or an exponent beyond Decimal128's") from None


def _moment(value: dt.datetime) -> dt.datetime:
    if value.microsecond % 1000:
        raise _Refused("sub-millisecond digits: BSON dates hold milliseconds")
    if value.tzinfo is None:  # the sources deliver wall clocks and UTC instants naive
        return value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


def _text(value: object) -> str:
    if isinstance(value, dt.timedelta):  # MySQL TIME: -838:59:59 .. 838:59:59
        sign, rest = ("-", -value) if value < dt.timedelta(0) else ("", value)
        hours, seconds = divmod(rest.days * 86_400 + rest.seconds, 3600)
        fraction = f".{rest.microseconds:06d}" if rest.microseconds else ""
        return f"{sign}{hours:02d}:{seconds // 60:02d}:{seconds % 60:02d}{fraction}"
    if isinstance(value, (set, frozenset)):
        return ",".join(sorted(value))
    return value.isoformat() if isinstance(value, dt.time) else str(value)


def _json_fraction(text: str) -> float | Decimal128:
    """A JSON number with a fraction or exponent: a double when the double is that very number, else Decimal128
    (PostgreSQL's jsonb keeps numbers exact; a double would round them)."""
    number = float(text)
    if Decimal(repr(number)) == Decimal(text):
        return number
    return _decimal128(Decimal(text))


def _json(value: object) -> object:
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return _int64(value)
    return value


def _plain(value: object) -> object:
    """An ARRAY element by its Python type."""
    if value is None or isinstance(value, (bool, str, float)):
        return value
    if isinstance(value, int):
        return _int64(value)
    if isinstance(value, Decimal):
        return _decimal128(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Binary(bytes(value), 0)
    if isinstance(value, uuid.UUID):
        return Binary.from_uuid(value)
    if isinstance(value, dt.datetime):
        return _moment(value)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return _text(value)
