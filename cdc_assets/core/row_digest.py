"""One digest per row that is equal on MySQL/MariaDB and PostgreSQL for the same logical values, and the
comparison of a split's digests on both sides.

The two engines (and their drivers) hand the same value back in different forms: DECIMAL '1.50' vs numeric
'1.5000' when the target widened the scale, BIT as bytes vs a bit string, JSON as MySQL's or jsonb's spelling of it,
TIMESTAMP as a naive UTC datetime vs an aware one, TIME as a timedelta vs an interval or a time; a PostgreSQL source
compared with a MySQL target reads decimals, dates, timestamps and times as the text its snapshot wrote. `canonical`
renders each as one text per kind before hashing, so the digest compares values, not their spelling.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
import struct
import uuid
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from json.encoder import encode_basestring
from typing import Any, Iterable

from cdc_assets.core.json_text import json_text, normalized
from cdc_assets.core.tables import Kind

NULL = "\\N"  # cannot collide with a rendered value: every text value is JSON-quoted
UNREAD = "!unread "  # no rendered value starts with "!"
SAMPLE_KEYS = 10  # differing keys named per split


def canonical(value: Any, kind: Kind) -> str:
    """The text a value of `kind` is compared by, whichever engine and driver returned it."""
    try:
        return _canonical(value, kind)
    except (ValueError, TypeError, OverflowError, RecursionError):
        # A value this kind's rule cannot read (a BIT that is no bit string...): compared as the driver gave it, so
        # that the split fails naming its key instead of ending the verification.
        return UNREAD + json.dumps(repr(value))


def _canonical(value: Any, kind: Kind) -> str:
    # The commonest values first: a verification renders every column of every row, twice per round.
    if type(value) is str and kind not in _TEXT_READ:
        return encode_basestring(value)  # json.dumps(value, ensure_ascii=False), without building an encoder
    if type(value) is int and kind not in _INT_READ:
        return str(value)
    if value is None:
        return NULL
    if isinstance(value, memoryview | bytearray):
        value = bytes(value)
    if isinstance(value, str) and kind in _PARSED:
        value = _PARSED[kind](value)
    if kind == Kind.BIT:
        return str(int.from_bytes(value, "big") if isinstance(value, bytes) else int(str(value), 2))
    if kind == Kind.JSON or kind == Kind.ARRAY:
        return json_text(value)  # both range reads hand JSON over as its text (sinks/range_read.py)
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        # The target may declare a wider scale (unconstrained numeric -> decimal(65,30)): compare the number.
        return format(normalized(value), "f") if value.is_finite() else str(value)
    if isinstance(value, float) and kind == Kind.FLOAT32:
        # A single-precision value arrives as the double that holds it exactly (the sources' `compared_columns` and
        # sinks/range_read.py read it so) or as PostgreSQL's shortest text of it: both round to one single, whose
        # 9 digits tell every single apart. A double beyond any single (a wider target column) stays itself.
        single = struct.unpack("f", struct.pack("f", value))[0]
        return format(single, ".9g") if math.isinf(single) == math.isinf(value) else repr(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.timedelta):  # MySQL TIME, PostgreSQL interval without months
        return f"{value // dt.timedelta(microseconds=1)}us"
    if isinstance(value, dt.time):  # PostgreSQL time: the same instant of the day as a MySQL TIME's timedelta
        return f"{((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond}us"
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, uuid.UUID) or kind == Kind.UUID:
        return json.dumps(str(value).lower())
    return encode_basestring(str(value))


_DURATION = re.compile(r"(-)?(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?")


def _duration(text: str) -> dt.timedelta | str:
    """A TIME as text ('-838:59:59', '24:00:00', '12:00:00.5'): what a MySQL TIME or a PostgreSQL time holds."""
    m = _DURATION.fullmatch(text)
    if m is None:
        return text
    sign, h, mi, s, frac = m.groups()
    span = dt.timedelta(hours=int(h), minutes=int(mi), seconds=int(s), microseconds=int((frac or "0").ljust(6, "0")))
    return -span if sign else span


def _decimal(text: str) -> Decimal | str:
    try:
        return Decimal(text)
    except InvalidOperation:
        return text


def _parser(parse):
    def parsed(text: str):
        try:
            return parse(text)
        except ValueError:  # 'infinity', a BC date, a zero date: no value of the type, compared as text
            return text
    return parsed


# A PostgreSQL source renders these as text for a MySQL target (sources/postgres/types.py `select_expr`), which
# hands back the typed value: the text is parsed into it, so both sides render through the same branch below.
_PARSED = {Kind.DECIMAL: _decimal, Kind.DATE: _parser(dt.date.fromisoformat), Kind.TIME: _duration,
           Kind.DATETIME: _parser(dt.datetime.fromisoformat), Kind.TIMESTAMP: _parser(dt.datetime.fromisoformat)}
_TEXT_READ = {*_PARSED, Kind.BIT, Kind.JSON, Kind.ARRAY, Kind.UUID}  # kinds whose text is read, not compared as is
_INT_READ = {Kind.BIT, Kind.JSON, Kind.ARRAY}


def digest(values: Iterable[Any], kinds: Iterable[Kind]) -> str:
    return hashlib.sha256("\x1f".join(canonical(v, k) for v, k in zip(values, kinds)).encode()).hexdigest()[:32]


def key_text(values: Iterable[Any], kinds: Iterable[Kind]) -> str:
    """A key as one comparable text (also what a report names)."""
    return ", ".join(canonical(v, k) for v, k in zip(values, kinds))


@dataclass(frozen=True)
class SplitDiff:
    """Keys (as `key_text`) that differ between the source's and the target's rows of one split."""

    source_rows: int
    target_rows: int
    missing: list[str] = field(default_factory=list)  # in the source, not in the target
    extra: list[str] = field(default_factory=list)  # in the target, not in the source
    changed: list[str] = field(default_factory=list)  # in both, with other values

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.changed)

    def summary(self) -> str:
        if self.equal:
            return f"{self.source_rows} rows equal"
        parts = [f"{name} {len(keys)} ({'; '.join(sorted(keys)[:SAMPLE_KEYS])})"
                 for name, keys in (("missing in the target", self.missing), ("extra in the target", self.extra),
                                    ("different", self.changed)) if keys]
        return f"source {self.source_rows} rows, target {self.target_rows}: " + ", ".join(parts)


def compare(source: dict[str, str], target: dict[str, str]) -> SplitDiff:
    """`source`, `target`: row digest by key text."""
    return SplitDiff(
        len(source), len(target),
        missing=[k for k in source if k not in target],
        extra=[k for k in target if k not in source],
        changed=[k for k, d in source.items() if k in target and target[k] != d])
