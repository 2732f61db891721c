"""One text per JSON value, whichever engine spelled it (core/row_digest.py compares JSON and arrays by it).

Equal as JSON (mysql.md: jsonb normalizes whitespace and key order) is what the type mapping promises, so keys are
sorted, strings re-escaped and numbers compared by their value: MySQL prints a double as `1500.0` where jsonb keeps
`1500` from `1.5e3`, and the literal text of a MariaDB JSON column is what was written. A JSON `null` stays apart
from SQL NULL (which never reaches here), and a string from a number (`"1"` against `1`).

A text that is not JSON is compared as that text, marked so that no JSON value renders the same; it never fails
the verification."""
from __future__ import annotations

import json
import math
from decimal import Context, Decimal
from typing import Any

NOT_JSON = "!not json "  # no JSON value's canonical text starts with "!"


def json_text(value: Any) -> str:
    """`value`: JSON text (str or bytes) or what a driver parsed (dict, list, str within, numbers, ...)."""
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            value = bytes(value).decode()
        except UnicodeDecodeError:
            return NOT_JSON + bytes(value).hex()
    if isinstance(value, str):
        try:
            value = json.loads(value, parse_float=Decimal, parse_int=Decimal)
        except (ValueError, RecursionError):
            return NOT_JSON + json.dumps(value)
    return _render(value)


def _render(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | Decimal):
        return _number(Decimal(value))
    if isinstance(value, float):
        return _number(Decimal(repr(value))) if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        items = sorted(((str(k), v) for k, v in value.items()), key=lambda item: item[0])
        return "{" + ",".join(f"{json.dumps(k)}:{_render(v)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_render(v) for v in value) + "]"
    if isinstance(value, bytes | bytearray | memoryview):  # a bytea array element, as to_json spells it
        return json.dumps("\\x" + bytes(value).hex())
    # strings, and an array's dates or UUIDs as text; escaped, so that a lone surrogate (valid JSON) still encodes
    return json.dumps(str(value))


def _number(value: Decimal) -> str:
    if not value.is_finite():
        return str(value)
    # -0 (a MySQL double) and 0 are one JSON number; jsonb's numeric has no negative zero
    return "0" if value == 0 else str(normalized(value))


def normalized(value: Decimal) -> Decimal:
    """`value` without trailing zeros, every digit kept: `normalize()` alone rounds to the context's 28 digits, and
    two numbers differing past them would compare equal."""
    return value.normalize(Context(prec=max(len(value.as_tuple().digits), 1))) if value.is_finite() else value
