"""A PostgreSQL array from the log (nested lists, as psycopg2 casts it) as the text `to_json(col)` gives the
snapshot for a MySQL target: compact, characters unescaped, numbers as PostgreSQL prints them, temporal values in
ISO 8601, bytea as its hex text, json elements embedded as they are (MariaDB's JSON keeps the text as written)."""
from __future__ import annotations

import datetime as dt
import json
import math
import re
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

_TRAILING_ZEROS = re.compile(r"(\.\d*?)0+(?=\D|$)")  # of a fraction of a second
_BIT_STRING = re.compile(r"[01]+")
# float4out / float8out (utils/adt/float.c, common/f2s.c, d2s.c): the shortest digits, in fixed notation while the
# decimal exponent is in [-4, FLT_DIG or DBL_DIG), else as d.ddde+XX.
_FIXED_UP_TO = {"real": 6, "double precision": 15}


def array_json(element: str) -> Callable[[Any], str]:
    """The converter of arrays of `element` (the PostgreSQL element type, as format_type names it)."""
    base = re.sub(r"\(.*\)", "", element).strip()
    if base in ("bit", "bit varying"):
        return _bit_array  # psycopg2 has no caster for bit arrays: the value is the array's text, '{101,NULL}'
    if base in ("json", "jsonb"):
        return lambda value: _json(value, lambda text: text)
    if base in _FIXED_UP_TO:
        limit, single = _FIXED_UP_TO[base], base == "real"
        return lambda value: _json(value, lambda v: _float(v, limit, single))
    return lambda value: _json(value, None)


def _bit_array(value: Any) -> str:
    if not isinstance(value, str):
        return _json(value, None)
    return _BIT_STRING.sub(r'"\g<0>"', value).replace("{", "[").replace("}", "]").replace("NULL", "null")


def _json(value: Any, element: Callable[[Any], str] | None) -> str:
    if isinstance(value, list):
        return "[" + ",".join(_json(v, element) for v in value) + "]"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if element is not None:
        return element(value)
    if isinstance(value, int) or (isinstance(value, Decimal) and value.is_finite()):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return _float(value, 15, False)
    if isinstance(value, (bytes, memoryview)):
        return json.dumps("\\x" + bytes(value).hex())
    if isinstance(value, (dt.date, dt.time)):  # dt.datetime is a dt.date; to_json drops trailing zeros
        return json.dumps(_TRAILING_ZEROS.sub(r"\1", value.isoformat()))
    return json.dumps(value if isinstance(value, str) else str(value), ensure_ascii=False)


def _float(value: float, limit: int, single: bool) -> str:
    if not math.isfinite(value):
        return json.dumps(str(value).replace("inf", "Infinity").replace("nan", "NaN"))
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    digits = _shortest_single(value) if single else repr(value)
    sign, figures, exponent = Decimal(digits).normalize().as_tuple()
    text = "".join(map(str, figures))
    k = len(text) + exponent - 1  # the decimal exponent of the first digit
    if -4 <= k < limit:
        fixed = format(Decimal(digits).copy_abs().normalize(), "f")
        return ("-" if sign else "") + fixed
    mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{'+' if k >= 0 else '-'}{abs(k):02d}"


def _shortest_single(value: float) -> str:
    """The fewest digits that read back as the same float4, as float4out prints them."""
    for precision in range(1, 10):
        text = f"{value:.{precision}g}"
        try:
            if struct.unpack("<f", struct.pack("<f", float(text)))[0] == value:
                return text
        except OverflowError:  # rounded past FLT_MAX
            continue
    return repr(value)
