"""Which of a list of keys a relational source table holds now, compared exactly: text byte for byte, since a
case- or accent-insensitive collation would call 'abc' and 'ABC' one key."""
from __future__ import annotations

import uuid
from collections.abc import Callable

from cdc_assets.core.tables import Column, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect, qualified, quote_ident

PRESENT_CHUNK = 1000  # keys per lookup


def present_keys(url: DbUrl, db_type: str, schema: TableSchema, keys: list[tuple],
                 exact_key: Callable[[Column], bool]) -> set[tuple]:
    """The keys of `keys` the table holds, as `keys` gave them; `exact_key(column)`: whether a key column is
    compared as BINARY (its collation would not compare it byte for byte). On a connection of its own: the
    snapshot's commit thread asks, beside the reading thread."""
    exact = {c.name for c in schema.columns if exact_key(c)}
    cols = ", ".join(("BINARY " if k in exact else "") + quote_ident(db_type, k) for k in schema.primary_key)
    one = "(" + ", ".join("BINARY %s" if k in exact else "%s" for k in schema.primary_key) + ")"
    table = qualified(db_type, schema.table.namespace, schema.table.name)
    by_norm = {tuple(map(_comparable, key)): key for key in keys}
    found: set[tuple] = set()
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            for i in range(0, len(keys), PRESENT_CHUNK):
                chunk = keys[i:i + PRESENT_CHUNK]
                cur.execute(f"SELECT {cols} FROM {table} WHERE ({cols}) IN ({', '.join([one] * len(chunk))})",
                            [v for key in chunk for v in key])
                found.update(by_norm[n] for row in cur.fetchall() if (n := tuple(map(_comparable, row))) in by_norm)
    finally:
        conn.close()
    return found


def _comparable(value):
    """One form for a key value, whichever driver and engine returned it."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value)
        try:
            return value.decode("utf-8")  # MySQL returns BINARY-compared text as bytes
        except UnicodeDecodeError:
            return value
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
