"""MongoDB as a target, the parts that need no server: text the sources send parsed per kind, staged documents,
the bulk writes a batch turns into, range filters on `_id`, key orders, positions and leases as MongoDB's
documentation shapes them, and the refusals."""
import datetime as dt
import pickle
import uuid
from decimal import Decimal

import bson
import pytest
from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from pymongo import DeleteOne, ReplaceOne, UpdateOne

from cdc_assets.core.batches import MoveIncomplete, TableChanges, compact
from cdc_assets.core.boundary import JdbcExport, RowExport, RowFormat, TaskExport, Transport
from cdc_assets.core.events import Op, RowChange
from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.positions import PgPosition
from cdc_assets.core.splits import KeyRange
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import TableError
from cdc_assets.resumer.records import PositionRecord
from cdc_assets.sinks.mongodb.changes import operations
from cdc_assets.sinks.mongodb.documents import DocumentValueError, key_from_id, to_document
from cdc_assets.sinks.mongodb.leases import LEASE_SECS, take_filter, take_update
from cdc_assets.sinks.mongodb.positions import load_filter, upserts
from cdc_assets.sinks.mongodb.ranges import order_agrees, range_filter
from cdc_assets.sinks.mongodb.server import standalone_refusal, transactions_in
from cdc_assets.sinks.mongodb.sink import declared, id_form_differs
from cdc_assets.sinks.mongodb.staging import StageTarget, stage_rows, staged_document, task_write
from cdc_assets.sinks.mongodb.staging_collections import staging_name
from cdc_assets.sinks.mongodb.text_values import TextRefused, parse_text

TABLE = TableId("shop", "orders")
ID = Column("id", Kind.INT, "bigint")
URL = DbUrl.parse("mongodb://app:s3cret-pw@127.0.0.1:27017/?replicaSet=rs0")


def schema(*columns: Column, key: tuple = ("id",)) -> TableSchema:
    return TableSchema(TABLE, columns, key)


def stored(document: dict) -> dict:
    """What the server stores: the document through BSON bytes (read back as the sink's client does, tz-aware)."""
    return bson.decode(bson.encode(document), codec_options=bson.CodecOptions(tz_aware=True))


# -- text the sources send (Transport.as_text), per kind ---------------------------------------------------------

@pytest.mark.parametrize("kind, text, value", [
    (Kind.INT, "-9223372036854775808", -2**63),
    (Kind.UINT64, "18446744073709551615", 2**64 - 1),
    (Kind.YEAR, "2155", 2155),
    (Kind.DECIMAL, "12345.678900000000000000000000000000", Decimal("12345.678900000000000000000000000000")),
    (Kind.FLOAT64, "-1.5e-300", -1.5e-300),
    (Kind.BOOL, "t", True), (Kind.BOOL, "false", False),
    (Kind.DATE, "2024-02-29", dt.date(2024, 2, 29)),
    (Kind.DATETIME, "2024-02-29 23:59:59.123000", dt.datetime(2024, 2, 29, 23, 59, 59, 123000)),
    (Kind.TIMESTAMP, "2024-02-29 23:59:59+05:30",
     dt.datetime(2024, 2, 29, 23, 59, 59, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))),
    (Kind.BINARY, "\\x00ff10", b"\x00\xff\x10"),
    (Kind.ARRAY, '[1, "a", null, [2.5]]', [1, "a", None, [2.5]]),
    (Kind.TIME, "-838:59:59.000000", "-838:59:59.000000"),
    (Kind.BIT, "0000000101", "0000000101"),
    (Kind.UUID, "ab1154ac-acd8-49a4-8c61-756d70d3b21f", "ab1154ac-acd8-49a4-8c61-756d70d3b21f"),
    (Kind.JSON, '{"a": 1}', '{"a": 1}'),
])
def test_text_values_parse_per_kind(kind, text, value):
    parsed = parse_text(kind, text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize("kind, text, reason", [
    (Kind.DATE, "0000-00-00", "not a date"),  # MySQL's zero date
    (Kind.TIMESTAMP, "infinity", "not a timestamp"),  # PostgreSQL's ±infinity
    (Kind.DATE, "2000-01-01 BC", "not a date"),
    (Kind.ARRAY, "{1,2,3}", "array literal"),
    (Kind.BOOL, "maybe", "not a boolean"),
    (Kind.DECIMAL, "12,5", "not a decimal"),
])
def test_text_without_an_exact_value_is_refused(kind, text, reason):
    with pytest.raises(TextRefused, match=reason):
        parse_text(kind, text)


COLUMNS = (ID, Column("total", Kind.DECIMAL, "decimal(65,30)", precision=65, scale=30),
           Column("day", Kind.DATE, "date"), Column("at", Kind.TIMESTAMP, "timestamp(3)"),
           Column("bits", Kind.BIT, "bit(10)", length=10), Column("big", Kind.UINT64, "bigint unsigned"),
           Column("blob", Kind.BINARY, "varbinary(8)"), Column("note", Kind.STRING, "text"))
# as MySQL's select_expr sends them: BIT, DECIMAL(65,30), temporal kinds as text; integers and bytes native
AS_TEXT = (False, True, True, True, True, False, False, False)


def target(s: TableSchema = schema(*COLUMNS), as_text: tuple = AS_TEXT) -> StageTarget:
    return StageTarget(URL.render(masked=False), "shop", "_cdc_stage_orders_x_0", s, as_text)


def test_a_staged_document_is_the_target_document_plus_its_split_index():
    values = (3, 7, "12345.678900000000000000000000000000", "2024-02-29", "2024-02-29 23:59:59.123000", "0000000101",
              2**64 - 1, bytearray(b"\x00\x01"), None)
    doc = stored(staged_document(target(), values))
    assert list(doc) == ["_id", "_cdc_split", "total", "day", "at", "bits", "big", "blob", "note"]
    assert doc["_id"] == 7 and doc["_cdc_split"] == 3
    assert doc["total"] == Decimal128("12345." + "6789" + "0" * 25)
    utc = dt.timezone.utc
    assert doc["day"] == dt.datetime(2024, 2, 29, tzinfo=utc)
    assert doc["at"] == dt.datetime(2024, 2, 29, 23, 59, 59, 123000, tzinfo=utc)
    assert doc["bits"] == "0000000101" and doc["big"] == Decimal128(str(2**64 - 1))
    assert doc["blob"] == b"\x00\x01" and doc["note"] is None
    # the same row arriving with native values (the log phase) makes the same document
    native = {"id": 7, "total": Decimal("12345.678900000000000000000000000000"), "day": dt.date(2024, 2, 29),
              "at": dt.datetime(2024, 2, 29, 23, 59, 59, 123000), "bits": "0000000101", "big": 2**64 - 1,
              "blob": b"\x00\x01", "note": None}
    assert {k: v for k, v in doc.items() if k != "_cdc_split"} == stored(to_document(native, schema(*COLUMNS)))


def test_a_staged_composite_key_is_an_id_sub_document_in_key_order():
    s = schema(Column("region", Kind.STRING, "varchar(8)"), Column("no", Kind.INT, "int"),
               Column("qty", Kind.INT, "int"), key=("no", "region"))
    doc = stored(staged_document(target(s, (False, False, False)), (0, "eu", 5, 2)))
    assert list(doc["_id"]) == ["no", "region"] and doc["_id"] == {"no": 5, "region": "eu"}
    assert doc == {"_id": {"no": 5, "region": "eu"}, "_cdc_split": 0, "qty": 2}


def test_a_refused_text_value_names_table_row_and_column():
    values = (0, 9, "1.5", "0000-00-00", None, None, None, None, None)
    with pytest.raises(DocumentValueError) as caught:
        staged_document(target(), values)
    assert "row (9,) of shop.orders: column 'day' (date)" in caught.value.message
    assert "source.exclude_columns" in caught.value.hint


def export(as_text: tuple = AS_TEXT, fmt: RowFormat = RowFormat.COLUMNS) -> RowExport:
    how = TaskExport((), lambda task: iter(()), "_cdc_split int")
    return RowExport(fmt, how, tuple(Transport(c, t) for c, t in zip(COLUMNS, as_text)))


def test_the_staging_write_is_picklable_and_never_shows_the_password():
    staging = staging_name(TABLE, 4)
    write = task_write(URL, staging, TABLE, ("id",), export()).write
    again = pickle.loads(pickle.dumps(write))
    assert again.func is stage_rows and again.args[0].schema.primary_key == ("id",)
    assert again.args[0].url == URL.render(masked=False)  # the executors connect with it
    assert "s3cret-pw" not in repr(write) and "s3cret-pw" not in str(write)


def test_rows_in_another_format_are_refused_by_the_staging_write():
    endpoint = JdbcEndpoint("jdbc:mysql://h/db", "org.mariadb.jdbc.Driver", "u", "pw")
    copy = RowExport(RowFormat.COPY_TEXT, JdbcExport(endpoint, "SELECT 1", ("1=1",)), ())
    with pytest.raises(TableError, match="stages columns rows, not copy_text"):
        task_write(URL, staging_name(TABLE, 0), TABLE, ("id",), copy)


def test_staging_collections_are_named_per_table_and_first_split():
    a, b = staging_name(TABLE, 0), staging_name(TableId("shop", "Orders"), 0)
    assert a.namespace == "shop" and a.name.startswith("_cdc_stage_orders_") and a.name.endswith("_0")
    assert a != b and staging_name(TABLE, 0) == a and staging_name(TABLE, 16) != a


# -- a batch as bulk writes ----------------------------------------------------------------------------------

S = schema(ID, Column("qty", Kind.INT, "int"), Column("total", Kind.DECIMAL, "decimal(10,2)"),
           Column("note", Kind.STRING, "text"))


def no_documents(_id):
    raise AssertionError(f"nothing to read for {_id}")


def test_deletes_full_rows_and_partial_rows_become_ordered_operations():
    changes = TableChanges(TABLE, rows={(1,): {"id": 1, "qty": 2, "total": Decimal("9.50"), "note": None}},
                           partial={(2,): {"id": 2, "qty": 5, "note": None}}, deletes={(3,), (4,)})
    ops = operations(S, changes, no_documents)
    assert ops == [
        DeleteOne({"_id": 3}), DeleteOne({"_id": 4}),
        ReplaceOne({"_id": 1}, {"_id": 1, "qty": 2, "total": Decimal128("9.50"), "note": None}, upsert=True),
        UpdateOne({"_id": 2}, {"$set": {"qty": 5, "note": None}}),
    ]
    # field by field, as the driver will send them
    replace, update = ops[2], ops[3]
    assert replace._upsert is True and update._upsert in (None, False)
    assert update._doc == {"$set": {"qty": 5, "note": None}}


def test_a_partial_row_of_the_key_only_writes_nothing():
    assert operations(S, TableChanges(TABLE, partial={(2,): {"id": 2}}), no_documents) == []


def test_a_log_of_changes_compacts_into_the_writes_applied_one_by_one_would_leave():
    p = PgPosition(100)
    log = [RowChange(TABLE, Op.INSERT, (1,), {"id": 1, "qty": 1, "total": Decimal("1.00"), "note": "a"}, None, p),
           RowChange(TABLE, Op.UPDATE, (1,), {"id": 1, "qty": 2}, None, p),  # a partial image (TOAST) of a new row
           RowChange(TABLE, Op.UPDATE, (5,), {"id": 5, "note": "b"}, None, p),
           RowChange(TABLE, Op.DELETE, (6,), None, {"id": 6}, p)]
    ops = operations(S, compact(log, {TABLE: S})[TABLE], no_documents)
    assert ops == [DeleteOne({"_id": 6}),
                   ReplaceOne({"_id": 1}, {"_id": 1, "qty": 2, "total": Decimal128("1.00"), "note": "a"}, upsert=True),
                   UpdateOne({"_id": 5}, {"$set": {"note": "b"}})]


def key_change(old: int, new: int, after: dict, position=PgPosition(200)) -> RowChange:
    return RowChange(TABLE, Op.UPDATE, (new,), {"id": new, **after}, {"id": old}, position)


def test_a_key_change_with_the_whole_row_deletes_the_old_key_and_writes_the_new():
    changes = compact([key_change(1, 9, {"qty": 3, "total": Decimal("2.00"), "note": "x"})], {TABLE: S})[TABLE]
    assert operations(S, changes, no_documents) == [
        DeleteOne({"_id": 1}),
        ReplaceOne({"_id": 9}, {"_id": 9, "qty": 3, "total": Decimal128("2.00"), "note": "x"}, upsert=True)]


def test_a_key_change_without_unchanged_columns_copies_the_old_document_under_the_new_key():
    held = {1: {"_id": 1, "qty": 4, "total": Decimal128("7.25"), "note": "kept", "extra": "theirs"}}
    changes = compact([key_change(1, 9, {"qty": 5})], {TABLE: S})[TABLE]
    read = []
    ops = operations(S, changes, lambda _id: read.append(_id) or held.get(_id))
    assert read == [1, 9]  # read before any write
    assert ops == [DeleteOne({"_id": 1}),
                   ReplaceOne({"_id": 9}, {"_id": 9, "qty": 5, "total": Decimal128("7.25"), "note": "kept",
                                           "extra": "theirs"}, upsert=True)]
    assert list(ops[1]._doc)[0] == "_id"


def test_a_replayed_key_change_whose_new_key_is_already_there_updates_it():
    held = {9: {"_id": 9, "qty": 5, "total": Decimal128("7.25"), "note": "kept"}}
    changes = compact([key_change(1, 9, {"qty": 6})], {TABLE: S})[TABLE]
    assert operations(S, changes, held.get) == [DeleteOne({"_id": 1}), UpdateOne({"_id": 9}, {"$set": {"qty": 6}})]


def test_a_replayed_key_change_takes_the_moved_document_not_the_one_reinserted_under_the_old_key():
    """Replayed over its own result (a crash before the checkpoint, a snapshot read after it): the old key holds
    the row inserted there later, and the moved row is under the new key, which the source had free before."""
    reinserted = {"id": 1, "qty": 1, "total": Decimal("1.00"), "note": "new"}
    held = {1: {"_id": 1, "qty": 1, "total": Decimal128("1.00"), "note": "new"},
            9: {"_id": 9, "qty": 5, "total": Decimal128("7.25"), "note": "kept"}}
    changes = compact([key_change(1, 9, {"qty": 5}), RowChange(TABLE, Op.INSERT, (1,), reinserted, None,
                                                               PgPosition(200))], {TABLE: S})[TABLE]
    assert operations(S, changes, held.get) == [
        ReplaceOne({"_id": 1}, {"_id": 1, "qty": 1, "total": Decimal128("1.00"), "note": "new"}, upsert=True),
        UpdateOne({"_id": 9}, {"$set": {"qty": 5}})]


def test_a_key_change_whose_row_is_nowhere_stops_the_batch_naming_both_keys():
    changes = compact([key_change(1, 9, {"qty": 6})], {TABLE: S})[TABLE]
    with pytest.raises(MoveIncomplete, match=r"from key \(1,\) to \(9,\).*total, note.*the target x holds neither"):
        operations(S, changes, lambda _id: None, "the target x")


def test_a_key_change_a_later_snapshot_superseded_is_skipped():
    changes = compact([key_change(1, 9, {"qty": 6}, PgPosition(200))], {TABLE: S})[TABLE]
    changes.replaying_until = PgPosition(300)
    assert operations(S, changes, lambda _id: None) == [DeleteOne({"_id": 1})]


# -- ranges on _id and key order ---------------------------------------------------------------------------------

@pytest.mark.parametrize("column, key_range, kind, expected", [
    (ID, KeyRange(10, 20), "int", {"_id": {"$gte": 10, "$lt": 20}}),
    (ID, KeyRange(None, 2**40), "int", {"_id": {"$lt": Int64(2**40)}}),
    (Column("id", Kind.DECIMAL, "decimal(20,2)"), KeyRange("1.50", None), "decimal",
     {"_id": {"$gte": Decimal128("1.50")}}),
    (Column("id", Kind.UINT64, "bigint unsigned"), KeyRange("9223372036854775808", None), "decimal",
     {"_id": {"$gte": Decimal128("9223372036854775808")}}),
    (Column("id", Kind.DATE, "date"), KeyRange("2024-01-01", "2024-02-01"), "date",
     {"_id": {"$gte": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc),
              "$lt": dt.datetime(2024, 2, 1, tzinfo=dt.timezone.utc)}}),
    (Column("id", Kind.DATETIME, "datetime(3)"), KeyRange("2024-01-01 10:00:00.250000", None), "datetime",
     {"_id": {"$gte": dt.datetime(2024, 1, 1, 10, 0, 0, 250000, tzinfo=dt.timezone.utc)}}),
    (Column("id", Kind.UUID, "uuid"), KeyRange("00000000-0000-0000-0000-000000000000", None), "uuid",
     {"_id": {"$gte": Binary(bytes(16), 4)}}),
    (Column("id", Kind.BINARY, "varbinary(4)"), KeyRange(None, "00ff"), "binary", {"_id": {"$lt": Binary(b"\x00\xff", 0)}}),
    (Column("id", Kind.STRING, "varchar(9)"), KeyRange("a", "m"), "string", {"_id": {"$gte": "a", "$lt": "m"}}),
])
def test_a_split_range_is_a_filter_on_id_with_bounds_in_the_documents_bson_form(column, key_range, kind, expected):
    s = schema(column)
    got = range_filter(s, (key_range,), kind)
    assert got == expected
    assert bson.encode(stored({"filter": got})) == bson.encode({"filter": expected})  # what the driver sends


def test_several_splits_are_an_or_and_a_composite_key_filters_on_its_first_column_inside_id():
    s = schema(Column("no", Kind.INT, "int"), Column("region", Kind.STRING, "text"), key=("no", "region"))
    assert range_filter(s, (KeyRange(None, 5), KeyRange(5, 9)), "int") == {
        "$or": [{"_id.no": {"$lt": 5}}, {"_id.no": {"$gte": 5, "$lt": 9}}]}
    assert range_filter(s, (KeyRange(5, 9), KeyRange(None, None)), "int") == {}


@pytest.mark.parametrize("kind, source, agrees", [
    ("int", "mysql", True), ("int", "postgres", True),
    ("decimal", "mysql", True), ("decimal", "postgres", False),  # PostgreSQL's NaN sorts last, BSON's first
    ("date", "postgres", True), ("datetime", "mysql", True), ("datetime", "postgres", False),
    ("uuid", "postgres", True), ("uuid", "mysql", False),
    ("binary", "mysql", False), ("binary", "postgres", False),  # BinData: length first, then bytes
    ("string", "mysql", False), ("string", "postgres", False), ("no such kind", "mysql", False),
])
def test_key_order_agrees_only_where_bson_orders_that_source_s_keys_the_same(kind, source, agrees):
    assert order_agrees(kind, source) is agrees


def test_binary_keys_do_not_agree_because_bson_orders_bindata_by_length_first():
    """MongoDB's documented BinData order: length, then subtype, then bytes. b'\\xff' < b'\\x00\\x00' there,
    the reverse of every SQL byte order: a range [00 00, ff) judged by BSON would miss keys."""
    short, long_ = Binary(b"\xff", 0), Binary(b"\x00\x00", 0)
    by_bson = sorted([long_, short], key=lambda b: (len(b), b.subtype, bytes(b)))
    assert by_bson == [short, long_] and sorted([b"\xff", b"\x00\x00"]) == [b"\x00\x00", b"\xff"]
    assert not order_agrees("binary", "mysql")


def test_an_id_read_back_is_the_source_key_again():
    cases = [(ID, 7, 7), (Column("id", Kind.UINT64, "bigint unsigned"), 2**64 - 1, 2**64 - 1),
             (Column("id", Kind.DECIMAL, "decimal(9,2)"), Decimal("1.50"), Decimal("1.50")),
             (Column("id", Kind.UUID, "uuid"), "ab1154ac-acd8-49a4-8c61-756d70d3b21f",
              uuid.UUID("ab1154ac-acd8-49a4-8c61-756d70d3b21f")),
             (Column("id", Kind.BINARY, "varbinary(4)"), b"\x00\x01", b"\x00\x01"),
             (Column("id", Kind.DATE, "date"), dt.date(2024, 2, 29), dt.date(2024, 2, 29)),
             (Column("id", Kind.DATETIME, "datetime(3)"), dt.datetime(2024, 2, 29, 1, 2, 3, 4000),
              dt.datetime(2024, 2, 29, 1, 2, 3, 4000))]
    for column, value, key in cases:
        s = schema(column)
        back = stored(to_document({"id": value}, s))["_id"]
        assert key_from_id(back, s) == (key,), column
    composite = schema(Column("no", Kind.INT, "int"), Column("region", Kind.STRING, "text"), key=("no", "region"))
    assert key_from_id({"no": Int64(5), "region": "eu"}, composite) == (5, "eu")


# -- refusals -------------------------------------------------------------------------------------------------

def test_an_existing_collection_with_another_id_form_is_detected():
    composite = schema(Column("no", Kind.INT, "int"), Column("region", Kind.STRING, "text"), key=("no", "region"))
    assert not id_form_differs(None, S)
    assert not id_form_differs({"_id": 5}, S)
    assert id_form_differs({"_id": {"id": 5}}, S)
    assert not id_form_differs({"_id": {"no": 5, "region": "eu"}}, composite)
    assert id_form_differs({"_id": {"region": "eu", "no": 5}}, composite)  # another order is another _id
    assert id_form_differs({"_id": bson.ObjectId()}, composite)


def test_every_mappable_kind_declares_its_bson_type_and_an_unknown_one_is_refused():
    assert declared(Column("d", Kind.DECIMAL, "decimal(65,30)"), False) == "decimal"
    assert declared(Column("u", Kind.UUID, "uuid"), True) == "binData(4)"
    for kind in Kind:
        if kind is not Kind.UNKNOWN:
            assert declared(Column("c", kind, "x"), False)
    with pytest.raises(TableError, match="'c' .* has no BSON mapping"):
        declared(Column("c", Kind.UNKNOWN, "mystery"), False)


HELLO_STANDALONE = {"isWritablePrimary": True, "topologyVersion": {"counter": 0}, "maxBsonObjectSize": 16777216,
                    "maxMessageSizeBytes": 48000000, "maxWriteBatchSize": 100000, "localTime": dt.datetime(2024, 1, 1),
                    "logicalSessionTimeoutMinutes": 30, "connectionId": 5, "minWireVersion": 0, "maxWireVersion": 21,
                    "readOnly": False, "ok": 1.0}
HELLO_REPLICA_SET = {**HELLO_STANDALONE, "hosts": ["127.0.0.1:27017"], "setName": "rs0", "setVersion": 1,
                     "secondary": False, "primary": "127.0.0.1:27017", "me": "127.0.0.1:27017"}
HELLO_MONGOS = {**HELLO_STANDALONE, "msg": "isdbgrid"}


def test_transactions_are_known_from_the_hello_reply():
    assert not transactions_in(HELLO_STANDALONE)
    assert transactions_in(HELLO_REPLICA_SET) and transactions_in(HELLO_MONGOS)


def test_a_standalone_server_is_refused_for_positions_in_the_target_naming_server_and_way_out():
    error = standalone_refusal(URL, "resumer.resume_type from_target")
    assert "from_target needs multi-document transactions" in error.message
    assert "mongodb://app:***@127.0.0.1:27017" in error.message and "s3cret-pw" not in str(error)
    assert "--replSet" in error.hint and "sqlite or from_db" in error.hint


# -- positions and leases ------------------------------------------------------------------------------------

def test_position_records_are_upserted_on_their_unique_key_with_the_sql_tables_json():
    record = PositionRecord("t1", "SnapshotFinished", "shop.orders:0003", {"split": "x", "rows": 3}, "2026-01-01 00:00:00")
    (op,) = upserts([record])
    assert op == UpdateOne({"task_id": "t1", "resumer_type": "SnapshotFinished", "position_key": "shop.orders:0003"},
                           {"$set": {"position_data": '{"rows":3,"split":"x"}', "updated_at": "2026-01-01 00:00:00"},
                            "$setOnInsert": {"created_at": "2026-01-01 00:00:00"}}, upsert=True)
    assert load_filter("t1", None, ["x"]) == {"task_id": "t1"}
    assert load_filter("t1", "CdcDoing", None) == {"task_id": "t1", "resumer_type": "CdcDoing"}
    assert load_filter("t1", "SnapshotDoing", ["a", "b"]) == {
        "task_id": "t1", "resumer_type": "SnapshotDoing", "position_key": {"$in": ["a", "b"]}}


def test_a_lease_is_taken_when_free_ours_or_expired_by_the_servers_clock():
    assert take_filter("t1|s3", "me") == {
        "_id": "t1|s3", "$or": [{"owner": "me"}, {"$expr": {"$lt": ["$expires_at", "$$NOW"]}}]}
    assert take_update("me") == [{"$set": {"owner": "me", "expires_at": {"$add": ["$$NOW", LEASE_SECS * 1000]}}}]


def test_the_sink_and_the_position_store_speak_the_engines_protocols():
    """Structural: every method of `Sink` (and `PositionStore`, plus `write_in`) with the same parameters."""
    import inspect

    from cdc_assets.core.boundary import Sink
    from cdc_assets.resumer.store import PositionStore
    from cdc_assets.sinks.mongodb.positions import MongoPositionStore
    from cdc_assets.sinks.mongodb.sink import MongoSink

    for protocol, implementation in ((Sink, MongoSink), (PositionStore, MongoPositionStore)):
        for name, member in vars(protocol).items():
            if callable(member) and not name.startswith("_"):
                ours = getattr(implementation, name, None)
                assert ours is not None, f"{implementation.__name__} lacks {name}"
                assert list(inspect.signature(ours).parameters) == list(inspect.signature(member).parameters), name
    assert MongoSink.db_type == "mongo" and callable(MongoSink.split_locks) and callable(MongoPositionStore.write_in)


def test_a_postgresql_array_travels_to_mongo_as_json_not_as_an_array_literal():
    from cdc_assets.sources.postgres.types import select_expr

    expr, as_text = select_expr(Column("tags", Kind.ARRAY, "integer[]"), '"tags"', "mongo")
    assert (expr, as_text) == ('to_json("tags")::text', True)
    assert parse_text(Kind.ARRAY, "[1,2,null]") == [1, 2, None]


@pytest.mark.parametrize("column, bound, kind", [
    (Column("id", Kind.DATE, "date"), "0000-00-00", "date"),  # MySQL's zero date
    (Column("id", Kind.DATETIME, "timestamp"), "infinity", "datetime"),
    (Column("id", Kind.DATETIME, "datetime(6)"), "2024-01-01 00:00:00.000001", "datetime"),
])
def test_a_split_bound_without_a_bson_form_is_refused_naming_table_and_bound(column, bound, kind):
    with pytest.raises(DocumentValueError, match=f"split bound '{bound}' of shop.orders on 'id'") as caught:
        range_filter(schema(column), (KeyRange(bound, None),), kind)
    assert "--replan" in caught.value.hint
