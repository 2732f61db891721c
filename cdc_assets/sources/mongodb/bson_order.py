"""MongoDB's order of BSON values, as the `_id` index sorts them, so a split's range can be judged in Python.

"Comparison/Sort Order" (https://www.mongodb.com/docs/manual/reference/bson-type-comparison-order/), lowest first:

    MinKey < Null < Numbers (int, long, double, decimal) < Symbol, String < Object < Array < BinData
           < ObjectId < Boolean < Date < Timestamp < Regular Expression < MaxKey

Within a type: numbers by value, whatever their BSON type (1 == 1.0 == Decimal128("1.00"); NaN below every other
number); strings by their UTF-8 bytes (the `simple` collation); objects field by field (the field's type, then its
name, then its value; a prefix first); arrays element by element; BinData by length, then subtype, then bytes;
ObjectId by its 12 bytes; dates by milliseconds; Timestamps by (t, i); regexes by pattern, then flags.
An `_id` cannot be an array, undefined or null in practice, but the order is complete anyway.
"""
from __future__ import annotations

import datetime as dt
import math
import re
import uuid
from decimal import Decimal
from fractions import Fraction

from bson.binary import Binary
from bson.code import Code
from bson.datetime_ms import DatetimeMS
from bson.decimal128 import Decimal128
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp

# The server's own canonical type numbers (canonicalizeBSONType in src/mongo/bson/bsontypes.h).
MIN_KEY, NULL, NUMBER, STRING, OBJECT, ARRAY, BINARY, OBJECT_ID, BOOLEAN, DATE, TIMESTAMP, REGEX, MAX_KEY = (
    -1, 5, 10, 15, 20, 25, 30, 35, 40, 45, 47, 50, 127)

RANK_NAMES = {MIN_KEY: "MinKey", NULL: "null", NUMBER: "number", STRING: "string", OBJECT: "object", ARRAY: "array",
              BINARY: "binData", OBJECT_ID: "objectId", BOOLEAN: "bool", DATE: "date", TIMESTAMP: "timestamp",
              REGEX: "regex", MAX_KEY: "MaxKey"}


class UnorderedValue(TypeError):
    """A Python value that is no BSON value (so it has no place in the order)."""


def rank(value: object) -> int:
    """The canonical type rank of a decoded BSON value."""
    if isinstance(value, MinKey):
        return MIN_KEY
    if isinstance(value, MaxKey):
        return MAX_KEY
    if value is None:
        return NULL
    if isinstance(value, bool):  # before int: bool is an int in Python
        return BOOLEAN
    if isinstance(value, (int, float, Decimal128, Decimal)):
        return NUMBER
    if isinstance(value, str) and not isinstance(value, Code):
        return STRING
    if isinstance(value, dict):
        return OBJECT
    if isinstance(value, (list, tuple)):
        return ARRAY
    if isinstance(value, (bytes, Binary, uuid.UUID)):
        return BINARY
    if isinstance(value, ObjectId):
        return OBJECT_ID
    if isinstance(value, (dt.datetime, DatetimeMS)):
        return DATE
    if isinstance(value, Timestamp):
        return TIMESTAMP
    if isinstance(value, (Regex, re.Pattern)):
        return REGEX
    raise UnorderedValue(f"{type(value).__name__} value {value!r} is not a BSON value MongoDB can order")


def _number_key(value: object) -> tuple:
    if isinstance(value, Decimal128):
        value = value.to_decimal()
    if isinstance(value, Decimal):
        if value.is_nan():
            return (0,)
        if value.is_infinite():
            return (1,) if value < 0 else (3,)
        return (2, Fraction(value))
    if isinstance(value, float):
        if math.isnan(value):
            return (0,)
        if math.isinf(value):
            return (1,) if value < 0 else (3,)
        return (2, Fraction(value))
    return (2, Fraction(int(value)))


def _millis(value: dt.datetime | DatetimeMS) -> int:
    if isinstance(value, DatetimeMS):
        return int(value)
    if value.tzinfo is None:  # pymongo decodes BSON dates as naive UTC by default
        value = value.replace(tzinfo=dt.timezone.utc)
    delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _binary_key(value: bytes | Binary | uuid.UUID) -> tuple:
    if isinstance(value, uuid.UUID):
        value = Binary.from_uuid(value)
    subtype = value.subtype if isinstance(value, Binary) else 0
    return (len(value), subtype, bytes(value))


def sort_key(value: object) -> tuple:
    """A Python key that orders decoded BSON values exactly as MongoDB orders them in an index."""
    r = rank(value)
    if r == NUMBER:
        return (r, _number_key(value))
    if r == STRING:
        return (r, value.encode("utf-8"))
    if r == OBJECT:
        return (r, tuple(_field_key(k, v) for k, v in value.items()))
    if r == ARRAY:
        return (r, tuple(sort_key(v) for v in value))
    if r == BINARY:
        return (r, _binary_key(value))
    if r == OBJECT_ID:
        return (r, value.binary)
    if r == BOOLEAN:
        return (r, bool(value))
    if r == DATE:
        return (r, _millis(value))
    if r == TIMESTAMP:
        return (r, (value.time, value.inc))
    if r == REGEX:
        pattern = value.pattern if isinstance(value.pattern, str) else value.pattern.decode()
        return (r, (pattern.encode("utf-8"), _regex_flags(value.flags).encode("utf-8")))
    return (r,)


def _field_key(name: str, value: object) -> tuple:
    key = sort_key(value)
    return (key[0], name.encode("utf-8"), key)


_REGEX_FLAGS = (("i", re.I), ("l", re.L), ("m", re.M), ("s", re.S), ("u", re.U), ("x", re.X))


def _regex_flags(flags: int | str) -> str:
    """MongoDB compares a regex's options as its letters, sorted (as BSON stores them)."""
    if isinstance(flags, str):
        return "".join(sorted(flags))
    return "".join(letter for letter, bit in _REGEX_FLAGS if flags & bit)


def compare(a: object, b: object) -> int:
    ka, kb = sort_key(a), sort_key(b)
    return (ka > kb) - (ka < kb)

