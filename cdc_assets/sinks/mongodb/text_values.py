"""Values the sources send as text (`Transport.as_text`) parsed back into the Python values `documents` converts.

The SQL targets let the database parse such text on insert; MongoDB parses nothing, so the sink does, per kind.
What the text cannot be exactly (MySQL's zero dates, PostgreSQL's ±infinity and BC dates, a PostgreSQL array
literal) is refused by `documents` with the row and column named, never guessed at.
"""
from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal, InvalidOperation

from cdc_assets.core.tables import Kind

_TRUE, _FALSE = ("t", "true", "1"), ("f", "false", "0")


class TextRefused(ValueError):
    """The text of a value has no exact BSON form (the caller names row and column)."""


def parse_text(kind: Kind, text: str) -> object:  # noqa: PLR0911 - one branch per kind reads best
    try:
        if kind in (Kind.INT, Kind.YEAR, Kind.UINT64):
            return int(text)
        if kind is Kind.DECIMAL:
            return Decimal(text)
        if kind in (Kind.FLOAT32, Kind.FLOAT64):
            return float(text)  # 'NaN', 'Infinity' included: doubles hold them
        if kind is Kind.BOOL:
            if text.lower() in _TRUE + _FALSE:
                return text.lower() in _TRUE
            raise TextRefused(f"{text!r} is not a boolean")
        if kind is Kind.DATE:
            return dt.date.fromisoformat(text)
        if kind in (Kind.DATETIME, Kind.TIMESTAMP):
            # MySQL's CAST(... AS CHAR) and PostgreSQL's to_char give 'YYYY-MM-DD HH:MM:SS[.ffffff]' (UTC for
            # instants); an offset, where one comes, is kept and converted by `documents`.
            return dt.datetime.fromisoformat(text)
        if kind in (Kind.BINARY, Kind.GEOMETRY):
            if text.startswith("\\x"):
                return bytes.fromhex(text[2:])
            raise TextRefused("binary sent as text without the \\x hex form")
        if kind is Kind.ARRAY:
            if not text.startswith("["):
                raise TextRefused("an array literal, not the JSON array (to_json) a MongoDB target needs")
            return json.loads(text)
    except (ValueError, InvalidOperation) as exc:
        if isinstance(exc, TextRefused):
            raise
        raise TextRefused(f"{text[:60]!r} is not a {kind.value} value BSON can hold ({exc})") from None
    return text  # strings, ENUM, SET, BIT, TIME, INTERVAL, OTHER, UUID and JSON text: `documents` takes text
