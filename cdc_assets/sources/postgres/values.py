"""pgoutput values -> the Python values the snapshot reads. pgoutput protocol v1 sends every value as the
type's text output (PostgreSQL 15 "Logical Replication Message Formats", TupleData 't'); psycopg2's
typecasters parse it as a SELECT's result would be, except where `PINNED` says otherwise.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import psycopg2
import psycopg2.extensions as ext

Caster = Callable[[str, Any], Any]  # (text, cursor) -> value, as psycopg2 typecasters are called


def _text(value: str, cursor) -> str:
    return value


def _single(value: float) -> float:
    """The float4 value itself, as `real::float8` reads it in the snapshot (the text is its shortest form)."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _then(cast: Caster, convert: Callable[[Any], Any]) -> Caster:
    """`cast`, then `convert` on every non-NULL element (arrays come as nested lists)."""
    def apply(value: Any) -> Any:
        if isinstance(value, list):
            return [apply(v) for v in value]
        return None if value is None else convert(value)
    return lambda value, cursor: apply(cast(value, cursor))


def _keeping(oid: int, array_oid: int, cast: Caster, kept: Callable[[str], bool]) -> dict[int, Caster]:
    """`cast` for a type and its arrays, except for the texts no Python value holds, which stay the server's
    text (the sink's cast and a MySQL target parse them as the snapshot's text): psycopg2 reads 'infinity'
    dates as date.max and time '24:00:00' as 00:00."""
    element = ext.new_type((oid,), f"CDC_{oid}",
                           lambda value, cursor: value if value is None or kept(value) else cast(value, cursor))
    return {oid: element, array_oid: ext.new_array_type((array_oid,), f"CDC_{array_oid}", element)}


def _infinite(text: str) -> bool:
    return text in ("infinity", "-infinity")


def _midnight_end(text: str) -> bool:
    return text.startswith("24:")  # time and timetz allow 24:00:00, a Python time does not


# By type OID (pg_type.h); arrays of each beside it.
PINNED: dict[int, Caster] = {
    **_keeping(1082, 1182, ext.PYDATE, _infinite),  # date
    **_keeping(1114, 1115, ext.PYDATETIME, _infinite),  # timestamp
    **_keeping(1184, 1185, ext.PYDATETIMETZ, _infinite),  # timestamptz
    **_keeping(1083, 1183, ext.PYTIME, _midnight_end),  # time
    **_keeping(1266, 1270, ext.PYTIME, _midnight_end),  # timetz
    114: _text, 199: ext.UNICODEARRAY,  # json
    3802: _text, 3807: ext.UNICODEARRAY,  # jsonb
    2950: _text, 2951: ext.UNICODEARRAY,  # uuid
    1186: _text, 1187: ext.UNICODEARRAY,  # interval
    1700: ext.DECIMAL, 1231: ext.DECIMALARRAY,  # numeric
    17: _then(psycopg2.BINARY, bytes), 1001: _then(ext.BINARYARRAY, bytes),  # bytea
    700: _then(ext.FLOAT, _single), 1021: _then(ext.FLOATARRAY, _single),  # real
    # Ranges as their text, which both targets take (psycopg2 would make Range objects PyMySQL cannot write).
    3904: _text, 3926: _text, 3906: _text, 3908: _text, 3910: _text, 3912: _text,
}


def caster(type_oid: int) -> Caster:
    """How a text value of type `type_oid` becomes the value the snapshot reads.

    `PINNED` holds, whatever typecasters the process registers globally: numeric -> Decimal, bytea -> bytes,
    real -> its exact single-precision value, json/jsonb -> the JSON text (the sink parses it), uuid -> str,
    interval -> its text in IntervalStyle postgres (a timedelta cannot hold months), arrays of those as lists,
    date/timestamp/timestamptz -> date, datetime, aware datetime in UTC, but 'infinity' and '-infinity' as text,
    time/timetz -> time, but '24:00:00' as text, arrays of those as lists. Other types go through psycopg2's
    typecasters (bool, int, arrays -> lists, ...); OIDs psycopg2 does not know (enums, domains, extension types)
    stay text."""
    return PINNED.get(type_oid) or ext.string_types.get(type_oid) or _text



# psycopg2's stock casters whose work a builtin does on PostgreSQL's output text, without the call through
# psycopg2 (which encodes the text again for C): int(), float(), Decimal(), and 't' for true.
_BUILTINS: list[tuple[Any, Callable[[str], Any]]] = [  # psycopg2's casters are unhashable
    (ext.INTEGER, int), (ext.LONGINTEGER, int), (ext.FLOAT, float), (ext.DECIMAL, Decimal), (ext.BOOLEAN, "t".__eq__),
]


def converter(type_oid: int, cursor) -> Callable[[str], Any] | None:
    """`caster(type_oid)` as a function of the text alone (`cursor` passed on to psycopg2's casters); None when
    the value is its text (text, varchar, json, ...): the log reader then leaves it as decoded."""
    cast = caster(type_oid)
    if cast is _text or cast is psycopg2.STRING:
        return None
    fast = [builtin for stock, builtin in _BUILTINS if cast is stock]
    return fast[0] if fast else lambda text: cast(text, cursor)
