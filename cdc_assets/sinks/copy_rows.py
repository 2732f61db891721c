"""Log rows into a PostgreSQL target by COPY: a large batch of one table goes into a temporary table of text
columns, which one DELETE ... USING and one INSERT ... SELECT then apply with the same `CAST(... AS type)` the
VALUES statements use. The server then parses plain COPY lines instead of a statement of 5,000 rows of CAST
expressions, and no Python value is rendered as an SQL literal by psycopg2's adapters. A batch's fresh rows (its first
change of their key was an INSERT) may go by COPY straight into the target table instead (`copied_into`).

COPY text format (PostgreSQL 15 docs, "COPY", "Text Format"): one line per row, columns separated by a tab,
NULL as \\N, and a backslash, newline, carriage return or tab inside a value escaped as \\\\, \\n, \\r, \\t.

A value is rendered as the text whose cast to the column's type gives what the VALUES path gives: the text of
a string, an int, a float (its shortest exact text, as `postgres_values.param`), a Decimal, a date or time (ISO 8601, as psycopg2 quotes them), bytes as bytea's hex text,
a timedelta as psycopg2's interval text, a list as an array literal of those, every element quoted. A bool or an
int goes into a boolean column as 't' or 'f' (an int's cast to boolean is "not zero"). Anything else (an int
for a bit string, a bool for another type, a type not listed) raises `NotCopied`: the caller applies that batch
with VALUES statements.
"""
from __future__ import annotations

import io
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from functools import partial
from itertools import repeat
from typing import Any, Callable, Iterable

import psycopg2

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.copy_text import NULL, SEPARATOR, SPECIAL, escape
from cdc_assets.core.tables import Kind, TableSchema
from cdc_assets.sinks.postgres_values import log_values

COPY_MIN_ROWS = 200  # smaller batches: VALUES statements (a temporary table costs catalog writes per batch)
_BOOLEAN = ("boolean", "bool")


class NotCopied(Exception):
    """A value COPY text cannot carry with the same meaning as a VALUES parameter."""


def _bytes(value) -> str:
    return "\\x" + bytes(value).hex()  # bytea's hex format


def _decimal(value: Decimal) -> str:
    return "NaN" if value.is_nan() else str(value)  # also Infinity and -Infinity, which numeric holds


def _interval(value: timedelta) -> str:
    return f"{value.days} days {value.seconds}.{value.microseconds:06d} seconds"


def _iso(value) -> str:
    return value.isoformat()


# By exact type: subclasses are looked up by isinstance in `_text`.
_TEXT: dict[type, Callable[[Any], str]] = {
    str: str, int: str, float: repr, Decimal: _decimal, datetime: _iso, date: _iso, time: _iso, timedelta: _interval,
    bytes: _bytes, bytearray: _bytes, memoryview: _bytes,
}

# Types whose text holds no character COPY escapes: rendered without the escaping pass.
_PLAIN = {kind: _TEXT[kind] for kind in (float, Decimal, datetime, date, time, timedelta)}


def column_renderer(type_sql: str, before: Callable[[Any], Any] | None = None) -> "_Renderer":
    """How a value of a column of type `type_sql` (first converted by `before`, if given) becomes its COPY text:
    called on one value, or `.column(values)` on all of a column's. The renderer raises NotCopied."""
    base = type_sql.removesuffix("[]").removesuffix("[]")
    boolean, bits = base in _BOOLEAN, base.startswith("bit")
    plain_ints = not boolean and not bits

    def text(value: Any) -> str:
        kind = type(value)
        if kind is bool or (boolean and kind is int):
            if not boolean:
                raise NotCopied(f"a bool for a {type_sql} column")
            return "t" if value else "f"
        if kind is int and bits:
            raise NotCopied(f"an int for a {type_sql} column")  # CAST(5 AS bit(8)) is 00000101
        convert = _TEXT.get(kind)
        if convert is not None:
            return convert(value)
        if kind is list:
            return _array(value, text)
        for known, convert in _TEXT.items():
            if isinstance(value, known) and not isinstance(value, bool):
                return convert(value)
        raise NotCopied(f"a {kind.__name__} value for a {type_sql} column")

    def render(value: Any) -> str:
        # Strings and ints first, without a call: most values of most rows.
        if value is None:
            return NULL
        kind = value.__class__
        if kind is str:
            return escape(value)
        if kind is int:
            if plain_ints:
                return str(value)
        elif (convert := _PLAIN.get(kind)) is not None:
            return convert(value)
        return escape(text(value))

    return _Renderer(render, before, plain_ints)


def _array(values: list, text: Callable[[Any], str]) -> str:
    """An array literal ("Array Value Input"): nested lists as nested braces, every element double-quoted with
    its backslashes and quotes escaped, so that no element text needs to be known safe."""
    items = []
    for value in values:
        if value is None:
            items.append("NULL")
        elif type(value) is list:
            items.append(_array(value, text))
        else:
            items.append('"' + text(value).replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "{" + ",".join(items) + "}"


class _Renderer:
    """A column's renderer. `column` renders a whole column through one builtin mapped over it (C loops, no
    Python call per value) when its values are all of one type whose text a builtin gives: most columns of most
    batches; otherwise value by value."""

    def __init__(self, render: Callable[[Any], str], before: Callable[[Any], Any] | None, plain_ints: bool) -> None:
        self.render, self.before, self.plain_ints = render, before, plain_ints  # `render` takes converted values

    def __call__(self, value: Any) -> str:
        return self.render(value if self.before is None else self.before(value))

    def column(self, values: list) -> list[str]:
        if self.before is not None:
            values = list(map(self.before, values))
        kinds = set(map(type, values))
        nulls = _NONE in kinds
        kinds.discard(_NONE)
        kind = kinds.pop() if len(kinds) == 1 else None
        if kind is str:
            joined = "".join(filter(None, values))  # once, not once per special character
            if any(c in joined for c in SPECIAL):
                values = [v if v is None else escape(v) for v in values]
            return [NULL if v is None else v for v in values] if nulls else values
        convert = _BUILTIN_TEXT.get(kind) if kind is not int or self.plain_ints else None
        if convert is None:
            return list(map(self.render, values))
        texts = [NULL if v is None else convert(v) for v in values] if nulls else list(map(convert, values))
        if kind is Decimal and "N" in "".join(texts):  # NaN in any spelling: see _decimal
            return list(map(self.render, values))
        return texts


_NONE = type(None)
# Types a builtin renders as `_TEXT` does, with no character COPY escapes.
_BUILTIN_TEXT: dict[type, Callable[[Any], str]] = {
    int: str, float: repr, Decimal: str, datetime: datetime.isoformat, date: date.isoformat, time: time.isoformat,
}


def copy_lines(rows: Iterable[Iterable], renderers: list[_Renderer]) -> bytes:
    """The COPY text of `rows` (UTF-8), each row's values rendered by `renderers` in order. Raises NotCopied."""
    return copy_columns([list(column) for column in zip(*rows)], renderers)


def copy_columns(columns: list[list], renderers: list[_Renderer]) -> bytes:
    """The COPY text of the rows whose values `columns` hold, column by column. Raises NotCopied."""
    texts = [render.column(values) for render, values in zip(renderers, columns)]
    if not texts or not texts[0]:
        return b""
    return ("\n".join(map(SEPARATOR.join, zip(*texts))) + "\n").encode("utf-8")


def stage(cursor, name: str, columns: list[str], data: bytes) -> None:
    """A temporary table `name` of text columns holding the COPY text `data`; dropped at the commit, or by
    `drop` once applied (a batch of several tables creates several in one transaction)."""
    cursor.execute(f"CREATE TEMPORARY TABLE {name} ({', '.join(f'{c} text' for c in columns)}) ON COMMIT DROP")
    cursor.copy_expert(f"COPY {name} FROM STDIN", io.BytesIO(data), size=1 << 20)


def rows_texts(schema: TableSchema, types: dict[str, str], changes: TableChanges) -> tuple[bytes, bytes]:
    """The COPY text of a batch's fresh rows, and of its other full rows, in the schema's column order (`types`:
    each column's declared type; NotCopied: a value COPY text cannot carry). The two texts together are every
    full row's."""
    names = [c.name for c in schema.columns]
    param = log_values(schema, types)
    geometry = {c.name for c in schema.columns if c.kind == Kind.GEOMETRY}  # the only columns `param` converts
    renderers = [column_renderer(types[n], partial(param, n) if n in geometry else None) for n in names]
    rows, fresh = changes.rows, changes.fresh
    if not fresh:
        parts = ([], list(rows.values()))
    elif len(fresh) == len(rows):  # all of them: compaction keeps `fresh` within `rows`
        parts = (list(rows.values()), [])
    else:
        parts = ([], [])
        for key, row in rows.items():
            parts[key not in fresh].append(row)
    return tuple(copy_columns([list(map(dict.get, part, repeat(n))) for n in names], renderers) if part else b""
                 for part in parts)


def copied_into(cursor, table: str, columns: list[str], text: bytes) -> bool:
    """COPY `text` into `table` under a savepoint: False, with the savepoint rolled back, when a row's key is
    there already (a replay) or a value fails the column's input where the VALUES path's explicit cast may take
    it (a bit string of another length: the cast pads or cuts it); the caller then applies those rows as it
    applies the others."""
    cursor.execute("SAVEPOINT cdc_fresh")
    try:
        cursor.copy_expert(f"COPY {table} ({', '.join(columns)}) FROM STDIN", io.BytesIO(text), size=1 << 20)
    except (psycopg2.IntegrityError, psycopg2.DataError):
        cursor.execute("ROLLBACK TO SAVEPOINT cdc_fresh; RELEASE SAVEPOINT cdc_fresh")
        return False
    cursor.execute("RELEASE SAVEPOINT cdc_fresh")
    return True
