"""MySQL 8 binary JSON, as decoded by pymysqlreplication, printed as MySQL prints the document (what the
snapshot reads from a JSON column); MariaDB's JSON is LONGTEXT and already text.

Format: sql/json_binary.h (binary layout) and sql-common/json_dom.cc `wrapper_to_string` (the text).
"""
from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pymysqlreplication import json_binary
from pymysqlreplication.util.bytes import decode_decimal, decode_variable_length


def json_text(value: Any) -> str:
    """A JSON column's binlog value as the snapshot reads it: the server's own text of the document."""
    if isinstance(value, str):
        return value  # MariaDB: JSON is LONGTEXT, already text
    # MySQL 8 binary JSON decodes to Python values with bytes for keys and strings.
    return _mysql_json(value)


def _mysql_json(value: Any) -> str:
    """A decoded binary JSON document as MySQL prints it (Json_wrapper::to_string): ", " and ": " between
    members, keys in stored order."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_mysql_json(k)}: {_mysql_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_mysql_json(v) for v in value) + "]"
    if isinstance(value, JsonScalar):
        return value.text
    if isinstance(value, float):
        return double_text(value)
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return json.dumps(value, ensure_ascii=False)


MY_GCVT_MAX_FIELD_WIDTH = 34  # DBL_DIG + 4 + max(5, MAX_DECPT_FOR_F_FORMAT) (include/mysql/strings/dtoa.h)
MAX_DECPT_FOR_F_FORMAT = 15  # DBL_DIG


def double_text(value: float) -> str:
    """A JSON double as MySQL prints it: my_gcvt(d, MY_GCVT_ARG_DOUBLE, MY_GCVT_MAX_FIELD_WIDTH) (strings/dtoa.cc),
    then ".0" when that has neither '.' nor 'e' (json_dom.cc wrapper_to_string). Python's repr differs: 1e+16
    for MySQL's 1e16, 1e-05 for 0.00001.

    my_gcvt asks dtoa (mode 4, 34 digits) for the shortest digits that round to the double: the digits of
    repr(). With at most 17 digits in a 34-character field no digit is ever cut, so only the choice between
    the 'f' and the 'e' format is left, taken here as my_gcvt takes it."""
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    sign, magnitude = ("-" if value < 0 else ""), abs(value)
    width = MY_GCVT_MAX_FIELD_WIDTH - (1 if value < 0 else 0)
    digits_tuple, exponent = Decimal(repr(magnitude)).normalize().as_tuple()[1:]
    digits = "".join(map(str, digits_tuple))
    n, decpt = len(digits), len(digits) + exponent
    exp_len = 1 + (decpt >= 101 or decpt <= -99) + (decpt >= 11 or decpt <= -9)
    have_space = (n - decpt + 2 if decpt <= 0 else n + 1 if decpt < n else decpt) <= width
    force_e = decpt <= 0 and width <= 2 - decpt and width >= 3 + exp_len
    f_format = ((have_space or (decpt <= width and (decpt >= -1 or (decpt == -2 and (n > 1 or not force_e)))
                                and not force_e))
                and (not have_space or (decpt >= -MAX_DECPT_FOR_F_FORMAT + 1
                                        and (decpt <= MAX_DECPT_FOR_F_FORMAT or n > decpt))))
    if f_format:
        if decpt <= 0:
            text = "0." + "0" * -decpt + digits
        elif decpt < n:
            text = digits[:decpt] + "." + digits[decpt:]
        else:
            text = digits + "0" * (decpt - n)
    else:
        text = digits[0] + ("." + digits[1:] if n > 1 else "") + f"e{decpt - 1}"
    text = sign + text
    return text if "." in text or "e" in text else text + ".0"


@dataclass(frozen=True)
class JsonScalar:
    """An opaque scalar of MySQL binary JSON (DECIMAL, a temporal value, raw bytes), as its JSON text."""

    text: str


MYSQL_TYPE_TIMESTAMP, MYSQL_TYPE_DATE, MYSQL_TYPE_TIME, MYSQL_TYPE_DATETIME = 7, 10, 11, 12
MYSQL_TYPE_NEWDECIMAL, MYSQL_TYPE_VAR_STRING = 246, 253
_PACKED_FRACTION = 24  # packed temporal values: (integer part << 24) + microseconds (my_time.h MY_PACKED_TIME_MAKE)


def _json_opaque(data: bytes) -> JsonScalar:
    """An opaque JSON value: field type, variable length, data (sql/json_binary.h), printed like MySQL's
    wrapper_to_string: DECIMAL by decimal2string (its scale kept), temporal values by my_TIME_to_str with 6
    decimals, anything else as "base64:type<N>:...". Replaces the library's parse_opaque, which decodes a DATE as
    a datetime, drops a TIME's sign (and fails beyond 23 hours) and a TIMESTAMP's value."""
    field_type = data[0]
    length, n = decode_variable_length(data[1:])
    payload = data[1 + n:1 + n + length]
    if field_type == MYSQL_TYPE_NEWDECIMAL:
        return JsonScalar(format(decode_decimal(payload), "f"))
    if field_type == MYSQL_TYPE_VAR_STRING:
        return JsonScalar(json.dumps(payload.decode("utf-8", errors="replace"), ensure_ascii=False))
    if field_type in (MYSQL_TYPE_DATE, MYSQL_TYPE_DATETIME, MYSQL_TYPE_TIMESTAMP, MYSQL_TYPE_TIME):
        return JsonScalar(f'"{_packed_temporal_text(field_type, int.from_bytes(payload[:8], "little", signed=True))}"')
    return JsonScalar(json.dumps(f"base64:type{field_type}:{base64.b64encode(payload).decode()}"))


def _packed_temporal_text(field_type: int, packed: int) -> str:
    sign, magnitude = ("-" if packed < 0 else ""), abs(packed)
    whole, micros = magnitude >> _PACKED_FRACTION, magnitude % (1 << _PACKED_FRACTION)
    if field_type == MYSQL_TYPE_TIME:  # hour(10) minute(6) second(6); hours up to 838
        return f"{sign}{whole >> 12 & 0x3FF:02}:{whole >> 6 & 0x3F:02}:{whole & 0x3F:02}.{micros:06}"
    ymd, hms = whole >> 17, whole & 0x1FFFF  # year*13+month (17) day (5) | hour (5) minute (6) second (6)
    date = f"{(ymd >> 5) // 13:04}-{(ymd >> 5) % 13:02}-{ymd & 0x1F:02}"
    if field_type == MYSQL_TYPE_DATE:
        return date
    return f"{date} {hms >> 12:02}:{hms >> 6 & 0x3F:02}:{hms & 0x3F:02}.{micros:06}"


json_binary.parse_opaque = _json_opaque  # the library's parse_json looks it up in its module at each call
