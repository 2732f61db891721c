"""BSON values as the engine's logical kinds: a document becomes one row of its collection's table.

The row holds the Python values the other sources' snapshots produce for the same kind: int, Decimal (from
Decimal128 exactly, never through a float), float, str, bytes, naive UTC datetimes (BSON dates are UTC
milliseconds), date, UUID text, and JSON as text. A document captured whole is canonical Extended JSON
(https://www.mongodb.com/docs/manual/reference/mongodb-extended-json/): every BSON type survives the text, so
ObjectId, Int64 vs Int32, Decimal128 and dates stay tellable apart and exact. A missing field is NULL.

A value its column cannot hold exactly raises `BsonValueError` naming collection, `_id`, field and value.
"""
from __future__ import annotations

import datetime as dt
import math
import uuid
from decimal import Decimal

from bson import json_util
from bson.binary import Binary, UuidRepresentation
from bson.datetime_ms import DatetimeMS
from bson.decimal128 import Decimal128
from bson.json_util import CANONICAL_JSON_OPTIONS
from bson.objectid import ObjectId

from cdc_assets.core.tables import Kind
from cdc_assets.errors import TableError
from cdc_assets.sources.mongodb.collections import DOCUMENT, ID, CollectionSpec, FieldSpec

# A client configured with uuidRepresentation=standard decodes subtype-4 binaries as uuid.UUID: written back the same.
EJSON = CANONICAL_JSON_OPTIONS.with_options(uuid_representation=UuidRepresentation.STANDARD)
_EXACT_FLOAT_INT = 2**53  # doubles hold every integer up to here, and not all beyond


class BsonValueError(TableError):
    """A BSON value that the column declared for its field cannot hold exactly, named with the document's `_id`.
    Way out: declare the field `json`, leave it out with `source.exclude_columns`, or fix the document
    (docs/connectors/mongodb.md, "BSON -> SQL mapping")."""


class _Refused(ValueError):
    pass


def ejson(value: object) -> str:
    """Canonical Extended JSON: the exact, type-preserving text of any BSON value."""
    return json_util.dumps(value, json_options=EJSON)


def to_row(document: dict, spec: CollectionSpec) -> dict:
    """One row of the collection's table; raises BsonValueError."""
    row = {ID: _key_value(document, spec)}
    if spec.fields is None:
        return {**row, DOCUMENT: ejson(document)}
    return {**row, **{f.name: to_value(document.get(f.name), f, spec, document) for f in spec.fields if f.name != ID}}


def to_key(document_key: dict, spec: CollectionSpec) -> tuple:
    """The row key of a change's `documentKey` (sharded collections add the shard key: only `_id` counts)."""
    return (_key_value(document_key, spec),)


def _key_value(document: dict, spec: CollectionSpec) -> object:
    """`_id` as its key column holds it. MongoDB allows one document with `_id: null`: only a json key column can
    hold it (as the text null); a SQL key is never NULL."""
    if document.get(ID) is None and spec.id_field.kind is Kind.JSON:
        return ejson(None)
    if document.get(ID) is None:
        raise BsonValueError(f"a document of {spec.table} has a null or missing _id, which a SQL key cannot hold",
                             f"capture the collection with id_kind: json (source.collections.{spec.table}), or give "
                             "the document an _id")
    return to_value(document[ID], spec.id_field, spec, document)


def id_value(key_value: object, spec: CollectionSpec) -> object:
    """The BSON `_id` a row key stands for (its column mapping undone), to place a change's key in a split."""
    field = spec.id_field
    if key_value is None:
        return None
    if field.objectid:
        return ObjectId(str(key_value))
    if field.kind is Kind.JSON:
        return json_util.loads(str(key_value), json_options=CANONICAL_JSON_OPTIONS)
    if field.kind is Kind.UUID:
        return Binary.from_uuid(uuid.UUID(str(key_value)))
    return key_value  # int, str, Decimal, bytes and datetimes sort as their BSON forms do (bson_order)


def to_value(value: object, field: FieldSpec, spec: CollectionSpec, document: dict) -> object:
    if value is None:
        return None
    try:
        return _convert(value, field)
    except _Refused as exc:
        raise BsonValueError(
            f"document {_id_text(document)} of {spec.table}: field '{field.name}' holds {_describe(value)}, "
            f"which a {_kind_text(field)} column cannot hold exactly ({exc})",
            f"declare the field with a kind that holds it (json holds any value) in "
            f"source.collections.{spec.table}, or fix the document") from None


def _convert(value: object, field: FieldSpec) -> object:
    kind = field.kind
    if kind is Kind.JSON:
        return ejson(value)
    if kind is Kind.BOOL:
        return _typed(value, bool)
    if isinstance(value, bool):  # a bool is an int in Python, not in BSON
        raise _Refused("a boolean fits a bool column only")
    if kind is Kind.INT:
        return _integer(value)
    if kind is Kind.DECIMAL:
        return _decimal(value, field)
    if kind is Kind.FLOAT64:
        return _double(value)
    if kind is Kind.STRING:
        if field.objectid:
            return str(_typed(value, ObjectId))  # 24 hex digits, the form every driver prints
        return _typed(value, str)
    if kind is Kind.BINARY:
        if isinstance(value, uuid.UUID):
            return bytes(Binary.from_uuid(value))
        return bytes(_typed(value, bytes))
    if kind is Kind.UUID:
        return str(_uuid(value))
    if kind in (Kind.DATETIME, Kind.TIMESTAMP):
        return _utc(value)
    if kind is Kind.DATE:
        moment = _utc(value)
        if moment.time() != dt.time(0):
            raise _Refused("a date column holds no time of day")
        return moment.date()
    raise _Refused(f"kind {kind.value} has no BSON source")


def _integer(value: object) -> int:
    if isinstance(value, int):
        return int(value)
    number = _decimal_of(value)
    if number is None or not number.is_finite() or number != number.to_integral_value():
        raise _Refused("not an integer")
    return int(number)


def _decimal(value: object, field: FieldSpec) -> Decimal:
    number = _decimal_of(value)
    if number is None or not number.is_finite():
        raise _Refused("not a finite number")
    if field.scale is not None and field.precision is not None:
        if _fraction_digits(number) > field.scale:
            raise _Refused(f"more than {field.scale} fractional digits")
        if number and number.adjusted() + 1 > field.precision - field.scale:
            raise _Refused(f"more than {field.precision - field.scale} integral digits")
    return number


def _fraction_digits(number: Decimal) -> int:
    """Significant fractional digits (trailing zeros do not count), without a context that could round."""
    _, digits, exponent = number.as_tuple()
    trailing = len(digits) - len("".join(map(str, digits)).rstrip("0"))
    return max(0, -(exponent + trailing)) if any(digits) else 0


def _decimal_of(value: object) -> Decimal | None:
    if isinstance(value, Decimal128):
        return value.to_decimal()
    if isinstance(value, int):
        return Decimal(int(value))
    if isinstance(value, float):
        # The shortest text that reads back as the same double: what the document's author wrote.
        return Decimal(repr(value)) if math.isfinite(value) else Decimal("NaN")
    return None


def _double(value: object) -> float:
    if isinstance(value, float):
        return value
    if isinstance(value, int) and abs(int(value)) <= _EXACT_FLOAT_INT:
        return float(value)
    if isinstance(value, Decimal128):
        number = value.to_decimal()
        if number.is_finite() and Decimal(float(number)) == number:
            return float(number)
    raise _Refused("not a number a double holds exactly")


def _typed(value: object, kind: type) -> object:
    if not isinstance(value, kind):
        raise _Refused(f"not a {kind.__name__}")
    return value


def _uuid(value: object) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, Binary) and value.subtype == 4:
        return value.as_uuid(UuidRepresentation.STANDARD)
    raise _Refused("not a UUID (binary subtype 4); subtype 3 UUIDs have driver-specific byte orders")


def _utc(value: object) -> dt.datetime:
    if isinstance(value, DatetimeMS):
        try:
            value = value.as_datetime()
        except Exception:  # noqa: BLE001 - bson raises OverflowError/ValueError/InvalidBSON by version
            raise _Refused("a date outside years 1..9999") from None
    if not isinstance(value, dt.datetime):
        raise _Refused("not a date")
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def _id_text(document: dict) -> str:
    return ejson(document.get(ID)) if ID in document else "(no _id)"


def _describe(value: object) -> str:
    text = ejson(value)
    return f"{type(value).__name__} {text if len(text) <= 80 else text[:77] + '...'}"


def _kind_text(field: FieldSpec) -> str:
    if field.objectid:
        return "objectid"
    if field.kind is Kind.DECIMAL:
        return f"decimal({field.precision},{field.scale})"
    return field.kind.value
