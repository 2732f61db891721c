"""MongoDB as a target: one collection per source table (`namespace.name` -> database.collection), each row a
document keyed by `_id` (`documents.py`), staging collections written inside Spark tasks and committed by
`staging_collections.py`, and commits in a multi-document transaction on a replica set.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, NoReturn

from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.boundary import RowExport, RowFormat, SplitRanges, TargetFormat, TaskWrite
from cdc_assets.core.splits import KeyRange
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import CdcError, TableError
from cdc_assets.sinks.mongodb.changes import operations
from cdc_assets.sinks.mongodb.documents import ID
from cdc_assets.sinks.mongodb.leases import MongoSplitLocks
from cdc_assets.sinks.mongodb.ranges import order_agrees
from cdc_assets.sinks.mongodb.server import MongoTx, collection, connect, has_transactions
from cdc_assets.sinks.mongodb.staging_collections import StagingCollections

# The BSON type each logical kind becomes (docs/connectors/mongodb-target.md); `documents.py` does the converting.
BSON_TYPES = {
    Kind.INT: "int/long", Kind.YEAR: "int", Kind.UINT64: "decimal", Kind.DECIMAL: "decimal",
    Kind.FLOAT32: "double", Kind.FLOAT64: "double", Kind.BOOL: "bool", Kind.STRING: "string", Kind.ENUM: "string",
    Kind.SET: "string", Kind.OTHER: "string", Kind.INTERVAL: "string", Kind.TIME: "string", Kind.BIT: "string",
    Kind.BINARY: "binData", Kind.GEOMETRY: "binData", Kind.UUID: "binData(4)", Kind.DATE: "date",
    Kind.DATETIME: "date", Kind.TIMESTAMP: "date", Kind.JSON: "object/array/scalar", Kind.ARRAY: "array",
}


def declared(column: Column, in_key: bool) -> str:
    if column.kind not in BSON_TYPES:
        raise TableError(f"column '{column.name}' ({column.native}) has no BSON mapping",
                         "leave it out with source.exclude_columns")
    return BSON_TYPES[column.kind]


def id_form_differs(document: dict | None, schema: TableSchema) -> bool:
    """An existing document whose `_id` is not the form `documents.document_id` writes for this key."""
    if document is None:
        return False
    _id = document[ID]
    if len(schema.primary_key) == 1:
        return isinstance(_id, dict)
    return not isinstance(_id, dict) or list(_id) != list(schema.primary_key)


class MongoSink:
    db_type = "mongo"
    dialect = "mongo"
    concurrent_commits = 1  # one session's transactions
    supports_savepoints = False  # no before-images yet: a backup of the collections instead
    repairs_lock_free = False  # a repair holds the range on the source (engine/repair.py)
    splits_per_slot = 1  # a group is one transaction, which MongoDB aborts after 60 s (docs/connectors/mongodb-target.md)

    def __init__(self, url: DbUrl, source_db_type: str, write_batch_size: int | None = None) -> None:
        # write_batch_size is the JDBC writer's; the staging TaskWrite batches by documents (staging.py)
        self.url = url
        self.source_db_type = source_db_type
        self.client = connect(url)
        self.transactional = has_transactions(self.client)
        self.staging = StagingCollections(self.client, url)

    def collection(self, table: TableId):
        return collection(self.client, table)

    def target_format(self) -> TargetFormat:
        return TargetFormat(self.db_type, RowFormat.COLUMNS, declared)

    def check_key_order(self, kind: str, source_db_type: str) -> bool:
        return order_agrees(kind, source_db_type)

    def ensure_table(self, schema: TableSchema, follow: bool = False) -> bool:
        """Create the collection when missing (True). An existing one is accepted when its documents' `_id` has
        the form this key gives (a value, or a sub-document of the key columns in order): other `_id`s would
        never match a key, and every row would be written a second time beside them."""
        names = {c.name for c in schema.columns}
        if ID in names and schema.primary_key != (ID,):
            raise TableError(f"table {schema.table} has a column named _id that is not its key; in the MongoDB "
                             f"target {self.url} the key is _id", "leave it out with source.exclude_columns")
        database = self.client[schema.table.namespace]
        created = schema.table.name not in database.list_collection_names(filter={"name": schema.table.name})
        if created:
            database.create_collection(schema.table.name)
        if len(schema.primary_key) > 1:
            # Splits cut on the first key column, inside `_id`: the `_id` index cannot serve a range on it alone.
            self.collection(schema.table).create_index(f"{ID}.{schema.primary_key[0]}", name="_cdc_split_column")
        if created:
            return True
        sample = self.collection(schema.table).find_one({}, {ID: 1})
        if id_form_differs(sample, schema):
            raise TableError(
                f"collection {schema.table} on {self.url} holds documents whose _id {sample[ID]!r} is not the form "
                f"the key ({', '.join(schema.primary_key)}) takes (" +
                ("a value" if len(schema.primary_key) == 1 else "a sub-document of the key columns in key order") + ")",
                "drop the collection so it is created from the source, or target another collection")
        return False

    def column_capacities(self, table: TableId, fresh: bool = False) -> dict:
        return {}  # a field holds any value: nothing is cut

    def alter_column_sql(self, table: TableId, column: Column, in_key: bool = False) -> str:
        return ""  # never asked: every field holds any value

    def add_columns(self, schema: TableSchema, columns: list[Column], defaults: dict[str, str] | None = None) -> None:
        """Documents have no schema; existing ones get the new fields as null, as a SQL ADD COLUMN gives them."""
        if columns:
            for column in columns:
                self.collection(schema.table).update_many({column.name: {"$exists": False}},
                                                          {"$set": {column.name: None}})

    def staging_table(self, table: TableId, first_split: int) -> TableId:
        return self.staging.name(table, first_split)

    def create_staging(self, staging: TableId, export: RowExport, key: tuple[str, ...]) -> None:
        self.staging.create(staging, export, key)

    def staging_write(self, staging: TableId, export: RowExport) -> TaskWrite:
        return self.staging.write(staging, export)

    def staged_bytes(self, staging: TableId) -> int:
        return self.staging.staged_bytes(staging)

    @contextmanager
    def transaction(self) -> Iterator[MongoTx]:
        """`with sink.transaction() as tx:` every write given `tx.session` commits when the block ends, or none
        when it raises. Majority writes and snapshot reads: a commit the primary acknowledged survives a failover."""
        with self.client.start_session() as session:
            if not self.transactional:
                yield MongoTx(self.client, None)
                return
            with session.start_transaction(read_concern=ReadConcern("snapshot"),
                                           write_concern=WriteConcern("majority")):
                yield MongoTx(self.client, session)

    def merge_staged(self, tx: MongoTx, schema: TableSchema, staging: TableId, export: RowExport,
                     replace: SplitRanges, counts: dict[int, int] | None = None) -> dict[int, int]:
        return self.staging.merge(tx, schema, staging, export, replace, counts)

    def unstaged_keys(self, tx: MongoTx, schema: TableSchema, staging: TableId, export: RowExport,
                      replace: SplitRanges) -> list[tuple]:
        return self.staging.unstaged_keys(tx, schema, staging, export, replace)

    def drop_staging(self, staging: TableId) -> None:
        self.staging.drop(staging)

    def parses_source_text(self) -> bool:
        return False  # documents hold typed values

    def prepare_changes(self, schema: TableSchema, changes: TableChanges) -> None:
        """Nothing to render ahead: the operations depend on documents read inside the transaction."""

    def apply_changes(self, tx: MongoTx, schema: TableSchema, changes: TableChanges) -> None:
        target = self.collection(schema.table)
        ops = operations(schema, changes, lambda _id: target.find_one({ID: _id}, session=tx.session),
                         f"the target {self.url}")
        if ops:
            target.bulk_write(ops, ordered=True, session=tx.session)

    def split_locks(self, task_id: str) -> MongoSplitLocks:
        return MongoSplitLocks(self.url, task_id)

    def range_rows(self, schema: TableSchema, key_range: KeyRange, kind: str, source_db_type: str,
                   source_keys: list[tuple]) -> list[tuple]:
        raise CdcError(f"verification of {schema.table} is not supported for a MongoDB target yet",
                       "compare counts by hand (db.collection.countDocuments), or re-snapshot the table")

    def repair_transaction(self, schema: TableSchema, ranges) -> NoReturn:
        raise NotImplementedError("repairs_lock_free is False: the repair holds the range on the source")

    def keep_rows(self, tx, schema: TableSchema, keys: set[tuple], ranges) -> NoReturn:
        raise NotImplementedError("repairs_lock_free is False: the repair holds the range on the source")

    def close(self) -> None:
        self.client.close()

