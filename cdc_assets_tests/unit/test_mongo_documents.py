"""SQL -> Mongo: rows as documents, keys as `_id`, every value in its exact BSON form or refused."""
import datetime as dt
import uuid
from decimal import Decimal

import bson
import pytest
from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64

from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.sinks.mongodb.documents import DocumentValueError, document_id, to_document


def schema(*columns: Column, key: tuple = ("id",)) -> TableSchema:
    return TableSchema(TableId("shop", "orders"), columns, key)


ID = Column("id", Kind.INT, "bigint")


def round_trip(document: dict) -> dict:
    """What the server stores: the document through BSON bytes."""
    return bson.decode(bson.encode(document))


def test_a_row_becomes_a_document_keyed_by_id_with_exact_bson_values():
    s = schema(ID, Column("total", Kind.DECIMAL, "decimal(65,30)", precision=65, scale=30),
               Column("big", Kind.UINT64, "bigint unsigned"), Column("blob", Kind.BINARY, "varbinary(8)"),
               Column("day", Kind.DATE, "date"), Column("at", Kind.TIMESTAMP, "timestamp(3)"),
               Column("dur", Kind.TIME, "time(6)"), Column("u", Kind.UUID, "uuid"), Column("doc", Kind.JSON, "json"),
               Column("note", Kind.STRING, "text"), Column("gone", Kind.STRING, "text"))
    row = {"id": 7, "total": Decimal("12345.678900000000000000000000000000"), "big": 2**64 - 1, "blob": b"\x00\x01",
           "day": dt.date(2024, 2, 29), "at": dt.datetime(2024, 2, 29, 23, 59, 59, 123000),
           "dur": dt.timedelta(hours=-838, minutes=-59, seconds=-59), "u": "ab1154ac-acd8-49a4-8c61-756d70d3b21f",
           "doc": '{"n": 9007199254740993, "x": 0.10000000000000000000001, "y": 1.5}', "note": None}
    doc = round_trip(to_document(row, s))
    assert list(doc) == ["_id", "total", "big", "blob", "day", "at", "dur", "u", "doc", "note"]  # `gone`: not in row
    assert doc["_id"] == 7
    assert str(doc["total"]) == "12345." + "6789" + "0" * 25  # 34 digits: the padding zeros beyond them dropped
    assert doc["total"].to_decimal() == row["total"]
    assert doc["big"] == Decimal128(str(2**64 - 1))
    assert doc["blob"] == b"\x00\x01"
    assert doc["day"] == dt.datetime(2024, 2, 29)
    assert doc["at"] == dt.datetime(2024, 2, 29, 23, 59, 59, 123000)
    assert doc["dur"] == "-838:59:59"
    assert doc["u"] == Binary.from_uuid(uuid.UUID(row["u"]))
    assert doc["doc"] == {"n": Int64(9007199254740993), "x": Decimal128("0.10000000000000000000001"), "y": 1.5}
    assert doc["note"] is None


def test_a_composite_key_becomes_an_id_sub_document_in_key_order():
    s = schema(Column("region", Kind.STRING, "varchar(8)"), Column("no", Kind.INT, "int"),
               Column("qty", Kind.INT, "int"), key=("no", "region"))
    doc = round_trip(to_document({"region": "eu", "no": 5, "qty": 2}, s))
    assert list(doc["_id"]) == ["no", "region"] and doc["_id"] == {"no": 5, "region": "eu"}
    assert "no" not in doc and "region" not in doc and doc["qty"] == 2
    assert document_id((5, "eu"), s) == doc["_id"]


@pytest.mark.parametrize("column, value, reason", [
    (Column("d", Kind.DECIMAL, "decimal(65,30)"), Decimal("12345678901234567890123456789012345.5"), "34 significant"),
    (Column("t", Kind.DATETIME, "datetime(6)"), dt.datetime(2024, 1, 1, 0, 0, 0, 123456), "sub-millisecond"),
    (Column("n", Kind.INT, "numeric"), 2**63, "beyond a 64-bit integer"),
    (Column("j", Kind.JSON, "jsonb"), '{"n": 18446744073709551615}', "beyond a 64-bit integer"),
    (Column("x", Kind.UNKNOWN, "mystery"), "x", "no BSON mapping"),
])
def test_values_without_an_exact_bson_form_are_refused_naming_row_and_column(column, value, reason):
    with pytest.raises(DocumentValueError, match=reason) as caught:
        to_document({"id": 1, column.name: value}, schema(ID, column))
    assert "row (1,) of shop.orders" in str(caught.value) and f"'{column.name}'" in str(caught.value)
    assert "source.exclude_columns" in caught.value.hint


def test_a_column_named_id_that_is_not_the_key_is_refused():
    s = schema(ID, Column("_id", Kind.STRING, "text"))
    with pytest.raises(DocumentValueError, match="column named _id that is not its key"):
        to_document({"id": 1, "_id": "x"}, s)


def test_ints_keep_their_width_and_arrays_convert_each_element():
    s = schema(ID, Column("small", Kind.INT, "int"), Column("tags", Kind.ARRAY, "numeric[]", element="numeric"))
    doc = round_trip(to_document({"id": 2**40, "small": 3, "tags": [Decimal("1.10"), None, 2]}, s))
    assert isinstance(doc["_id"], Int64) and not isinstance(doc["small"], Int64)
    assert doc["tags"] == [Decimal128("1.10"), None, 2]
