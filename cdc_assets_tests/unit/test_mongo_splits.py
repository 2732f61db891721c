"""Split plans on `_id` from the server's boundaries, in MongoDB's BSON order across types."""
import datetime as dt
import json

import pytest
from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp

from cdc_assets.core.splits import KeyRange, SplitPlan
from cdc_assets.core.tables import TableId
from cdc_assets.errors import TableError
from cdc_assets.sources.mongodb.bson_order import compare, sort_key
from cdc_assets.sources.mongodb.splits import (
    contains, decode_boundary, encode_boundary, plan_from_buckets, plan_from_sample, plan_from_split_keys,
    range_bounds)

ART = TableId("test", "artwork")
OID = ObjectId("5d505646cf6d4fe581014ab2")


def bucket(low, high, count: int) -> dict:
    return {"_id": {"min": low, "max": high}, "count": count}


# "$bucketAuto" (mongodb/docs, reference/operator/aggregation/bucketAuto.txt), "Single Facet Aggregation": four
# buckets of the artwork collection grouped by price, output exactly as printed there.
DOCS_BUCKETS = [bucket(Decimal128("76.04"), Decimal128("159.00"), 2), bucket(Decimal128("159.00"),
                Decimal128("199.99"), 2), bucket(Decimal128("199.99"), Decimal128("385.00"), 2),
                bucket(Decimal128("385.00"), Decimal128("483.00"), 2)]


def test_the_bson_order_is_mongodbs_across_types():
    # "Comparison/Sort Order" (reference/bson-type-comparison-order): MinKey, Null, Numbers, Symbol/String, Object,
    # Array, BinData, ObjectId, Boolean, Date, Timestamp, Regular Expression, MaxKey.
    ordered = [MinKey(), None, float("nan"), -5, Decimal128("1.5"), Int64(2), "", "a", "b", {"a": 1}, {"a": 1, "b": 0},
               {"b": 0}, [1], Binary(b"z", 0), Binary(b"aa", 0), OID, False, True, dt.datetime(1920, 1, 1),
               dt.datetime(2019, 8, 11), Timestamp(1565545664, 1), Regex("^H", "i"), MaxKey()]
    shuffled = list(reversed(ordered))
    assert sorted(shuffled, key=sort_key) == ordered
    assert compare(1, 1.0) == 0 and compare(Decimal128("1.00"), Int64(1)) == 0  # one number, whatever its type
    assert compare("é", "z") > 0  # UTF-8 bytes: 0xC3 sorts after 'z'
    assert compare({"a": "x"}, {"a": 1}) > 0  # a field's type first, before its value


def test_bucket_auto_boundaries_become_a_plan_of_the_server_counts():
    plan = plan_from_buckets(ART, list(reversed(DOCS_BUCKETS)), "2026-01-01T00:00:00")
    assert (plan.split_column, plan.key_kind) == ("_id", "bson")
    assert plan.boundaries == ('{"$numberDecimal": "159.00"}', '{"$numberDecimal": "199.99"}',
                               '{"$numberDecimal": "385.00"}')
    assert plan.estimated_rows == (2, 2, 2, 2)
    first, *_, last = plan.splits
    assert first.range.start is None and last.range.end is None  # rows beyond the sampled ends are read too


def test_a_plan_round_trips_through_json_keeping_each_boundarys_bson_type():
    values = [Int64(7), "7", OID]
    plan = plan_from_split_keys(ART, [{"_id": v} for v in values], 400, "now")  # splitVector's splitKeys shape
    again = SplitPlan.from_json(json.loads(json.dumps(plan.to_json())))
    assert again == plan and again.plan_id == plan.plan_id
    decoded = [decode_boundary(b) for b in again.boundaries]
    assert decoded == values and [type(v) for v in decoded] == [Int64, str, ObjectId]
    assert again.estimated_rows == (100, 100, 100, 100)


def test_boundaries_equal_in_bson_order_fold_into_one_split():
    buckets = [bucket(0, 1, 3), bucket(1.0, 2, 4), bucket(Decimal128("1"), 3, 5), bucket("a", "b", 6)]
    plan = plan_from_buckets(ART, buckets, "now")
    assert [decode_boundary(b) for b in plan.boundaries] == [1.0, "a"]
    assert plan.estimated_rows == (3, 9, 6)


def test_boundaries_out_of_bson_order_are_refused():
    with pytest.raises(TableError, match="out of _id order"):
        plan_from_split_keys(ART, [{"_id": OID}, {"_id": 5}], 10, "now")


def test_mixed_type_ids_split_where_the_server_said_and_every_id_falls_in_exactly_one_split():
    ids = [-3, 2.5, Int64(10**12), "alice", "bob", {"k": 1}, Binary(b"\x01", 0), OID, ObjectId(), True,
           dt.datetime(2020, 1, 1), Timestamp(5, 1)]
    plan = plan_from_sample(ART, list(reversed(ids)), 4, len(ids), "now")
    assert len(plan.splits) == 4
    cuts = [decode_boundary(b) for b in plan.boundaries]
    assert [type(c) for c in cuts] == [str, bytes, bool]  # quantiles of the sorted sample: 3 ids per split
    for value in ids:
        holders = [s.id for s in plan.splits if contains(s.range, value)]
        assert len(holders) == 1, (value, holders)
    assert contains(plan.splits[0].range, "alice") is False and contains(plan.splits[1].range, "alice")


def test_a_split_reads_along_the_id_index_with_inclusive_min_and_exclusive_max():
    r = KeyRange(encode_boundary(5), encode_boundary(OID))
    assert range_bounds(r) == {"hint": [("_id", 1)], "min": [("_id", 5)], "max": [("_id", OID)]}
    assert range_bounds(KeyRange(None, encode_boundary("m"))) == {"hint": [("_id", 1)], "max": [("_id", "m")]}
    assert contains(r, 5) and contains(r, "zzz") and not contains(r, OID) and not contains(r, 4.99)


def test_min_and_max_key_are_no_boundaries():
    with pytest.raises(ValueError, match="unbounded ends"):
        encode_boundary(MaxKey())
    plan = plan_from_buckets(ART, [bucket(MinKey(), 1, 2), bucket(MinKey(), 5, 0), bucket(5, 9, 3)], "now")
    assert [decode_boundary(b) for b in plan.boundaries] == [5] and plan.estimated_rows == (2, 3)
