"""COPY text lines of MongoDB rows, read back by a real PostgreSQL: what the renderer writes is what COPY stores.

Each value is what values.py makes of a BSON value (documents shaped as MongoDB's documentation prints them); the
line goes through `COPY ... FROM STDIN` into a table of the column types the PostgreSQL target declares, and the
value read back must equal the value rendered."""
import datetime as dt
import io
import json
import uuid
from decimal import Decimal

import pytest
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.objectid import ObjectId

from cdc_assets.core.tables import Column, Kind, TableId
from cdc_assets.sources.mongodb import copy_text
from cdc_assets.sources.mongodb.collections import parse_collection
from cdc_assets.sources.mongodb.copy_text import NotRenderable
from cdc_assets.sources.mongodb.values import to_row

TABLE = TableId("shop", "orders")
SPEC = parse_collection("shop.orders", {"fields": {
    "_id": "objectid", "name": "string", "qty": "int", "price": "decimal(34,10)", "ratio": "float64", "ok": "bool",
    "blob": "binary", "placed": "timestamp", "day": "date", "local": "datetime", "ref": "uuid", "extra": "json"}})
PG_TYPES = {"_id": "varchar(24)", "name": "text", "qty": "bigint", "price": "numeric(34,10)", "ratio": "float8",
            "ok": "boolean", "blob": "bytea", "placed": "timestamptz", "day": "date", "local": "timestamp",
            "ref": "uuid", "extra": "jsonb"}
OID = ObjectId("635019a078be67426d7cf4d2")  # the docs' insert event's _id

DOCUMENTS = [
    {"_id": OID, "name": "Giovanni Verga", "qty": Int64(2**62), "price": Decimal128("12345678901234567890.0123456789"),
     "ratio": 0.1, "ok": True, "blob": b"\x00\x01\\\n\xff", "placed": dt.datetime(2022, 10, 19, 15, 37, 4, 604000),
     "day": dt.datetime(2024, 2, 29), "local": dt.datetime(1, 1, 1), "ref": uuid.UUID("ab1154ac-acd8-49a4-8c61-756d70d3b21f"),
     "extra": {"n": Decimal128("-0.000"), "when": dt.datetime(2024, 1, 1), "tab": "a\tb"}},
    {"_id": ObjectId("635019a078be67426d7cf4d3"), "name": "tab\there\nnew line\r\\N back\\slash \u00e9\u4e2d\U0001F600",
     "qty": -1, "price": Decimal128("-0E-10"), "ratio": float("inf"), "ok": False, "blob": b"",
     "placed": dt.datetime(9999, 12, 31, 23, 59, 59, 999000), "day": dt.datetime(1970, 1, 1), "extra": [1, "\\u0000"]},
    {"_id": ObjectId("635019a078be67426d7cf4d4"), "ratio": float("-inf"), "price": Decimal128("1E+3"),
     "qty": 3.0, "extra": None},  # missing fields: NULL; a whole double in an int field
]


@pytest.fixture
def staging(servers, unique_name):
    servers.postgres.create_database(unique_name)
    conn = servers.postgres.connect(unique_name)
    cols = ", ".join(f'"{c.name}" {PG_TYPES[c.name]}' for c in SPEC.schema().columns)
    with conn.cursor() as cur:
        cur.execute("SET TIME ZONE 'America/New_York'")  # a session zone that would shift a zone-less instant
        cur.execute(f"CREATE TABLE staged (_cdc_split int, {cols})")
    yield conn
    conn.close()


def copied(conn, lines: list[str]) -> list[tuple]:
    with conn.cursor() as cur:
        cur.copy_expert("COPY staged FROM STDIN", io.BytesIO(("\n".join(lines) + "\n").encode()))
        names = ", ".join(f'"{c.name}"' for c in SPEC.schema().columns)
        cur.execute(f"SELECT _cdc_split, {names}, extra::text FROM staged ORDER BY _id")
        return cur.fetchall()


def test_every_kind_reads_back_through_copy_exactly(staging):
    rows = [to_row(d, SPEC) for d in DOCUMENTS]
    columns = SPEC.schema().columns
    lines = [copy_text.line(7, row, columns, TABLE, row["_id"]) for row in rows]

    back = copied(staging, lines)

    for row, got in zip(rows, back):
        assert got[0] == 7
        values = dict(zip([c.name for c in columns], got[1:-1]))
        for name in ("_id", "name", "qty", "ratio", "ok", "day", "local"):
            assert values[name] == row.get(name), name
        assert values["price"] == row.get("price")  # Decimal equality: every digit, scale aside
        assert (bytes(values["blob"]) if values["blob"] is not None else None) == row.get("blob")
        placed = values["placed"]
        assert (placed.astimezone(dt.timezone.utc).replace(tzinfo=None) if placed else None) == row.get("placed")
        assert (str(values["ref"]) if values["ref"] else None) == row.get("ref")
        assert (json.loads(got[-1]) if got[-1] is not None else None) == (
            json.loads(row["extra"]) if row.get("extra") is not None else None)


def test_decimal128_digits_survive_beyond_a_double():
    column = Column("price", Kind.DECIMAL, "bson decimal", precision=34, scale=10)
    value = Decimal128("12345678901234567890.0123456789").to_decimal()
    assert copy_text.field(value, column, TABLE, "k") == "12345678901234567890.0123456789"
    assert copy_text.field(Decimal("1E+3"), column, TABLE, "k") == "1000"  # never an exponent
    assert copy_text.field(Decimal("-0E-10"), column, TABLE, "k") == "-0.0000000000"


@pytest.mark.parametrize("value, text", [
    ("a\tb", "a\\tb"), ("a\nb", "a\\nb"), ("a\rb", "a\\rb"), ("back\\slash", "back\\\\slash"), ("\\N", "\\\\N"),
    ("\u00e9\u4e2d\U0001F600", "\u00e9\u4e2d\U0001F600"),
    (True, "t"), (False, "f"), (None, "\\N"), (2**63 - 1, "9223372036854775807"),
    (0.1, "0.1"), (float("nan"), "NaN"), (float("-inf"), "-Infinity"), (1e300, "1e+300"),
    (b"\x00\xff", "\\\\x00ff"), (dt.date(2024, 2, 29), "2024-02-29"),
    (dt.datetime(2022, 10, 19, 15, 37, 4, 604000), "2022-10-19 15:37:04.604000+00"),
    (dt.datetime(1, 1, 1), "0001-01-01 00:00:00.000000+00"),
])
def test_field_text_per_kind(value, text):
    assert copy_text.field(value, Column("c", Kind.STRING, "bson string"), TABLE, "k") == text


def test_nul_in_a_string_is_refused_naming_document_and_field():
    with pytest.raises(NotRenderable) as caught:
        copy_text.field("a\x00b", Column("name", Kind.STRING, "bson string"), TABLE, '{"$oid": "635019a0"}')
    assert "document {\"$oid\": \"635019a0\"} of shop.orders: field 'name'" in caught.value.message
    assert "NUL" in caught.value.message and "exclude_columns" in caught.value.hint


def test_json_holding_the_nul_escape_is_refused_but_an_escaped_backslash_is_not():
    column = Column("extra", Kind.JSON, "bson object")
    with pytest.raises(NotRenderable, match="U\\+0000"):
        copy_text.field('{"a": "x\\u0000"}', column, TABLE, "k")
    assert copy_text.field('["\\\\u0000"]', column, TABLE, "k") == '["\\\\\\\\u0000"]'  # the text \u0000, escaped
