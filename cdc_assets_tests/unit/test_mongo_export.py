"""The MongoDB source's export of a group of splits: one Spark task per split, the Spark schema of its rows, the
rows themselves in both target formats, and what a failed export says about the document and field."""
import datetime as dt
import pickle
import uuid
from decimal import Decimal

import pytest
from bson.decimal128 import Decimal128
from bson.objectid import ObjectId

from cdc_assets.core.boundary import RowFormat, TargetFormat, TaskExport
from cdc_assets.core.splits import KeyRange, Split
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import TableError
from cdc_assets.sources.mongodb.collections import parse_collection, spec_from_schema
from cdc_assets.sources.mongodb.export import LINE_DDL, read_task, render
from cdc_assets.sources.mongodb.source import MongoSource, explain, oplog_notes
from cdc_assets.sources.mongodb.values import BsonValueError, to_row

ORDERS = TableId("shop", "orders")
COLLECTIONS = {"shop.orders": {"fields": {"_id": "objectid", "qty": "int", "total": "decimal(40,4)",
                                          "placed": "timestamp", "tags": "json", "blob": "binary"}},
               "shop.events": None}
URL = DbUrl.parse("mongodb://cdc:s3cret@db1:27017,db2:27017/?replicaSet=rs0")
OID = ObjectId("635019a078be67426d7cf4d2")
BOUNDARY = '{"$oid": "635019a078be67426d7cf4d3"}'
SPLITS = [Split(ORDERS, 0, KeyRange(None, BOUNDARY), 10), Split(ORDERS, 1, KeyRange(BOUNDARY, None), 10)]
DOCUMENT = {"_id": OID, "qty": 3, "total": Decimal128("123456789012345678901234567890.1234"),
            "placed": dt.datetime(2022, 10, 19, 15, 37, 4, 604000), "tags": ["a\tb"], "blob": b"\x00"}


def target(rows: RowFormat) -> TargetFormat:
    return TargetFormat("postgres" if rows is RowFormat.COPY_TEXT else "mysql", rows, lambda column, key: "text")


@pytest.fixture
def source():
    source = MongoSource(URL, COLLECTIONS)  # pymongo connects lazily: nothing here talks to a server
    yield source
    source.close()


def test_collections_become_tables_keyed_by_id(source):
    assert set(source.specs) == {ORDERS, TableId("shop", "events")}
    whole = source.specs[TableId("shop", "events")].schema()
    assert [c.name for c in whole.columns] == ["_id", "document"] and whole.primary_key == ("_id",)
    schema = source.specs[ORDERS].schema()
    assert spec_from_schema(schema) == source.specs[ORDERS] and spec_from_schema(whole) == source.specs[whole.table]


def test_copy_text_export_is_one_task_per_split_reading_lines(source):
    schema = source.specs[ORDERS].schema()
    export = source.export(None, schema, SPLITS, target(RowFormat.COPY_TEXT))
    assert export.format is RowFormat.COPY_TEXT and isinstance(export.how, TaskExport)
    assert export.how.schema == LINE_DDL and export.how.read is read_task
    tasks = export.how.tasks
    assert [(t.index, t.range, t.spec.table) for t in tasks] == [(0, SPLITS[0].range, ORDERS),
                                                                 (1, SPLITS[1].range, ORDERS)]
    assert "s3cret" not in repr(tasks[0]) and pickle.loads(pickle.dumps(tasks[1])) == tasks[1]
    assert not any(t.as_text for t in export.transports)  # COPY parses every field into its typed column
    (line,) = render(tasks[1], to_row(DOCUMENT, tasks[1].spec), OID)
    assert line == ("1\t635019a078be67426d7cf4d2\t3\t123456789012345678901234567890.1234\t"
                    "2022-10-19 15:37:04.604000+00\t[\"a\\\\tb\"]\t\\\\x00")


def test_columns_export_types_what_spark_holds_and_carries_the_rest_as_text(source):
    schema = source.specs[ORDERS].schema()
    export = source.export(None, schema, SPLITS, target(RowFormat.COLUMNS))
    assert export.how.schema == ("_cdc_split int, `_id` string, `qty` bigint, `total` string, `placed` string, "
                                 "`tags` string, `blob` binary")
    assert [t.as_text for t in export.transports] == [False, False, True, True, True, False]
    row = render(export.how.tasks[0], to_row(DOCUMENT, export.how.tasks[0].spec), OID)
    assert row == (0, "635019a078be67426d7cf4d2", 3, "123456789012345678901234567890.1234",
                   "2022-10-19 15:37:04.604000", '["a\\tb"]', b"\x00")
    assert Decimal(row[3]) == DOCUMENT["total"].to_decimal()


def test_a_refused_value_from_an_executor_names_document_and_field():
    try:
        to_row({**DOCUMENT, "qty": 2.5}, parse_collection("shop.orders", COLLECTIONS["shop.orders"]))
    except BsonValueError as exc:
        wrapped = f"py4j.protocol.Py4JJavaError: ...\nTraceback ...\n{type(exc).__module__}.BsonValueError: {exc}\n"
    explained = explain(ORDERS, "s3cret", wrapped)
    assert isinstance(explained, TableError)
    assert "document {\"$oid\": \"635019a078be67426d7cf4d2\"} of shop.orders: field 'qty'" in explained.message
    assert "source.collections.shop.orders" in explained.hint


def test_a_value_postgresql_refused_names_collection_and_field():
    error = ('psycopg2.errors.InvalidTextRepresentation: invalid input syntax for type json\n'
             'CONTEXT:  COPY "stage_orders_0", line 3, column tags: "[oops"')
    explained = explain(ORDERS, "", error)
    assert "field 'tags'" in explained.message and "shop.orders" in explained.message
    assert explain(ORDERS, "", "java.lang.OutOfMemoryError") is None


def test_oplog_window_notes_warn_under_a_day():
    assert oplog_notes(1_700_000_000, 1_700_000_000 + 2 * 86_400)[0].startswith("oplog window 48.0 h")
    short = oplog_notes(1_700_000_000, 1_700_000_000 + 3600)
    assert "1.0 h" in short[0] and "under 1 day" in short[1] and "replSetResizeOplog" in short[1]
    assert "unknown" in oplog_notes(None, None)[0]



@pytest.mark.spark
@pytest.mark.parametrize("rows", [RowFormat.COPY_TEXT, RowFormat.COLUMNS])
def test_spark_takes_the_rows_in_the_schema_the_export_declares(spark, rows):
    spec = parse_collection("shop.all", {"fields": {
        "_id": "objectid", "b": "bool", "i": "int", "d": "decimal(40,4)", "f": "float64", "s": "string",
        "bin": "binary", "u": "uuid", "day": "date", "dt": "datetime", "ts": "timestamp", "j": "json"}})
    export = MongoSource(URL).export(None, spec.schema(), SPLITS[:1], target(rows))
    document = {"_id": OID, "b": True, "i": 2**62, "d": Decimal128("1.5"), "f": 0.25, "s": "é\t", "bin": b"\x01",
                "u": uuid.UUID("ab1154ac-acd8-49a4-8c61-756d70d3b21f"), "day": dt.datetime(2024, 2, 29),
                "dt": dt.datetime(2024, 1, 1, 1, 2, 3, 4000), "ts": dt.datetime(1970, 1, 1), "j": {"a": [1]}}
    missing = {"_id": ObjectId("635019a078be67426d7cf4d3")}
    rendered = [render(export.how.tasks[0], to_row(d, spec), d["_id"]) for d in (document, missing)]

    frame = spark.createDataFrame(rendered, schema=export.how.schema, verifySchema=True)

    back = [tuple(r) for r in frame.collect()]
    assert [tuple(bytes(v) if isinstance(v, bytearray) else v for v in r) for r in back] == rendered
    assert len(frame.columns) == (1 if rows is RowFormat.COPY_TEXT else 1 + len(spec.schema().columns))
