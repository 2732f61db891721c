"""Mongo -> SQL: documents as rows of their collection's table, declared fields or the whole document."""
import datetime as dt
import json
import uuid
from decimal import Decimal

import bson
import pytest
from bson import json_util
from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.json_util import CANONICAL_JSON_OPTIONS
from bson.objectid import ObjectId

from cdc_assets.core.tables import Kind, TableId
from cdc_assets.errors import ConfigError
from cdc_assets.sources.mongodb.collections import parse_collection
from cdc_assets.sources.mongodb.splits import contains, plan_from_split_keys
from cdc_assets.sources.mongodb.values import BsonValueError, id_value, to_key, to_row

# The "Example" table of "MongoDB Extended JSON (v2)" (mongodb/docs, source/reference/mongodb-extended-json.txt),
# canonical column, as one document; decoded through BSON bytes as a change stream or find() delivers it.
DOCS_CANONICAL = {
    "_id": {"$oid": "5d505646cf6d4fe581014ab2"},
    "arrayField": ["hello", {"$numberInt": "10"}],
    "dateField": {"$date": {"$numberLong": "1565546054692"}},
    "dateBefore1970": {"$date": {"$numberLong": "-1577923200000"}},
    "decimal128Field": {"$numberDecimal": "10.99"},
    "documentField": {"a": "hello"},
    "doubleField": {"$numberDouble": "10.5"},
    "infiniteNumber": {"$numberDouble": "Infinity"},
    "int32field": {"$numberInt": "10"},
    "int64Field": {"$numberLong": "50"},
    "minKeyField": {"$minKey": 1},
    "maxKeyField": {"$maxKey": 1},
    "regexField": {"$regularExpression": {"pattern": "^H", "options": "i"}},
    "timestampField": {"$timestamp": {"t": 1565545664, "i": 1}},
}


def docs_document() -> dict:
    parsed = json_util.loads(json.dumps(DOCS_CANONICAL), json_options=CANONICAL_JSON_OPTIONS)
    return bson.decode(bson.encode(parsed))


def spec(fields: dict | None = None, **raw):
    return parse_collection("engineering.users", {"fields": fields, **raw} if fields is not None else raw)


def test_a_whole_document_travels_as_canonical_extended_json_that_reads_back_to_the_same_bson():
    row = to_row(docs_document(), spec())
    assert row["_id"] == "5d505646cf6d4fe581014ab2"
    text = json.loads(row["document"])
    # Every field exactly as the docs' canonical column writes it: types survive (Int32 vs Int64, Decimal128).
    assert text == DOCS_CANONICAL
    back = json_util.loads(row["document"], json_options=CANONICAL_JSON_OPTIONS)
    assert bson.encode(back) == bson.encode(docs_document())


def test_declared_fields_take_their_kinds_exactly():
    fields = {"_id": "objectid", "dateField": "timestamp", "dateBefore1970": "datetime", "decimal128Field":
              "decimal(10,2)", "doubleField": "float64", "int32field": "int", "int64Field": "int",
              "documentField": "json", "arrayField": "json", "absent": "string"}
    row = to_row(docs_document(), spec(fields))
    assert row == {
        "_id": "5d505646cf6d4fe581014ab2",
        "dateField": dt.datetime(2019, 8, 11, 17, 54, 14, 692000),  # naive UTC, milliseconds
        "dateBefore1970": dt.datetime(1920, 1, 1),
        "decimal128Field": Decimal("10.99"),
        "doubleField": 10.5,
        "int32field": 10,
        "int64Field": 50,
        "documentField": '{"a": "hello"}',
        "arrayField": '["hello", {"$numberInt": "10"}]',
        "absent": None,  # a missing field is NULL
    }


def test_decimal128_stays_exact_to_its_34_digits_and_int64_beyond_a_doubles_reach():
    doc = {"_id": Int64(2**62 + 1), "price": Decimal128("1234567890123456789012345678.901234"), "n": Int64(2**63 - 1)}
    row = to_row(bson.decode(bson.encode(doc)), spec({"_id": "int", "price": "decimal(34,6)", "n": "int"}))
    assert row == {"_id": 2**62 + 1, "price": Decimal("1234567890123456789012345678.901234"), "n": 2**63 - 1}
    assert to_row({"_id": 1, "d": Decimal128("1.50")}, spec({"_id": "int", "d": "decimal(5,2)"}))["d"].as_tuple() \
        == Decimal("1.50").as_tuple()  # the scale the document holds, not a float's


def test_binary_uuid_bool_and_dates_map_to_their_kinds():
    u = uuid.UUID("ab1154ac-acd8-49a4-8c61-756d70d3b21f")  # the docs' collectionUUID
    doc = {"_id": ObjectId("635019a078be67426d7cf4d2"), "raw": Binary(b"\x00\xff\x10", 0), "u": Binary.from_uuid(u),
           "ok": True, "day": dt.datetime(2022, 10, 19)}
    row = to_row(bson.decode(bson.encode(doc)), spec({"_id": "objectid", "raw": "binary", "u": "uuid", "ok": "bool",
                                                      "day": "date"}))
    assert row == {"_id": "635019a078be67426d7cf4d2", "raw": b"\x00\xff\x10", "u": str(u), "ok": True,
                   "day": dt.date(2022, 10, 19)}


@pytest.mark.parametrize("field_kind, value, reason", [
    ("int", 2.5, "not an integer"),
    ("int", True, "boolean"),
    ("bool", 1, "not a bool"),
    ("decimal(10,2)", Decimal128("10.999"), "more than 2 fractional digits"),
    ("decimal(4,2)", Decimal128("123.4"), "more than 2 integral digits"),
    ("decimal(10,2)", float("inf"), "not a finite number"),
    ("float64", Int64(2**53 + 1), "not a number a double holds exactly"),
    ("float64", Decimal128("0.1"), "not a number a double holds exactly"),
    ("string", 42, "not a str"),
    ("string", ObjectId("635019a078be67426d7cf4d2"), "not a str"),  # its hex would meet the string of that hex
    ("objectid", "635019a078be67426d7cf4d2", "not a ObjectId"),
    ("date", dt.datetime(2022, 10, 19, 15, 37, 4, 604000), "no time of day"),
    ("uuid", Binary(b"0123456789abcdef", 3), "subtype 3"),
])
def test_values_a_column_cannot_hold_exactly_are_refused_naming_document_and_field(field_kind, value, reason):
    doc = {"_id": ObjectId("58a4eb4a30c75625e00d2820"), "f": value}
    with pytest.raises(BsonValueError, match=reason) as caught:
        to_row(doc, spec({"_id": "objectid", "f": field_kind}))
    assert "58a4eb4a30c75625e00d2820" in str(caught.value) and "engineering.users" in str(caught.value)
    assert "'f'" in str(caught.value) and "source.collections.engineering.users" in caught.value.hint


def test_a_decimal_field_reads_a_double_as_the_number_written_not_its_binary_expansion():
    row = to_row({"_id": 1, "d": 0.1}, spec({"_id": "int", "d": "decimal(10,4)"}))
    assert row["d"] == Decimal("0.1")


def test_the_key_of_a_change_is_the_documents_id_even_with_a_shard_key():
    s = spec({"_id": "objectid", "userName": "string"})
    assert to_key({"userName": "alice123", "_id": ObjectId("58a4eb4a30c75625e00d2820")}, s) == (
        "58a4eb4a30c75625e00d2820",)
    assert to_key({"_id": {"a": 1}}, spec(id_kind="json")) == ('{"a": {"$numberInt": "1"}}',)


def test_a_null_id_is_a_key_only_for_a_json_key_column():
    assert to_row({"_id": None, "a": 1}, spec(id_kind="json"))["_id"] == "null"
    assert id_value("null", spec(id_kind="json")) is None
    with pytest.raises(BsonValueError, match="null or missing _id") as caught:
        to_row({"_id": None, "a": 1}, spec())
    assert "id_kind: json" in caught.value.hint


def test_collection_config_builds_the_table_and_refuses_what_has_no_mapping():
    whole = spec().schema()
    assert whole.table == TableId("engineering", "users") and whole.primary_key == ("_id",)
    assert [(c.name, c.kind) for c in whole.columns] == [("_id", Kind.STRING), ("document", Kind.JSON)]
    declared = spec({"_id": "int", "total": "decimal(20,4)", "at": "timestamp"}).schema()
    assert [(c.name, c.kind, c.precision, c.scale) for c in declared.columns] == [
        ("_id", Kind.INT, None, None), ("total", Kind.DECIMAL, 20, 4), ("at", Kind.TIMESTAMP, 3, None)]
    for raw, message in [({"fields": {"a": "int"}}, "do not declare _id"),
                         ({"fields": {"_id": "int", "a": "decimal"}}, "without precision and scale"),
                         ({"fields": {"_id": "int", "a": "geometry"}}, "which no BSON value maps to"),
                         ({"fields": {"_id": "int", "a.b": "int"}}, "not top-level"),
                         ({"id_kind": "bool"}, "cannot hold an _id"),
                         ({"fieldz": {}}, "unknown key")]:
        with pytest.raises(ConfigError, match=message):
            parse_collection("engineering.users", raw)
    with pytest.raises(ConfigError, match="database.collection"):
        parse_collection("users", {})


@pytest.mark.parametrize("raw, ids", [
    ({}, [ObjectId("58a4eb4a30c75625e00d2820"), ObjectId("635019a078be67426d7cf4d2")]),
    ({"id_kind": "json"}, [7, "7", ObjectId("58a4eb4a30c75625e00d2820"), {"k": 1}]),
    ({"id_kind": "uuid"}, [Binary.from_uuid(uuid.UUID(int=5)), Binary.from_uuid(uuid.UUID(int=9))]),
    ({"id_kind": "int"}, [Int64(-4), 12]),
])
def test_a_row_key_maps_back_to_its_bson_id_so_a_change_lands_in_the_split_holding_it(raw, ids):
    s = spec(**raw)
    plan = plan_from_split_keys(s.table, [{"_id": ids[1]}], 2, "now")
    for n, value in enumerate(ids):
        key = to_key({"_id": value}, s)
        assert id_value(key[0], s) == value
        holders = [split.index for split in plan.splits if contains(split.range, id_value(key[0], s))]
        assert holders == [0 if n < 1 else 1]
