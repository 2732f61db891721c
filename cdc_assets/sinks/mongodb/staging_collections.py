"""The snapshot's staging collections in a MongoDB target, from their creation to the commit of their group.

A group's commit (`merge`) deletes what the splits cover in the target, by range on `_id` where BSON orders the
key as the source does (`ranges.order_agrees`), else by the staged `_id`s, then copies the staged documents in
through the driver, batch by batch, all inside the commit's transaction ($merge/$out cannot run in one). The
staged documents themselves are written inside Spark tasks (`staging.py`).
"""
from __future__ import annotations

import hashlib
from typing import Iterator

from pymongo import MongoClient

from cdc_assets.core.boundary import SPLIT_COLUMN, RowExport, SplitRanges, TaskWrite
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import TableError
from cdc_assets.sinks.mongodb.documents import ID, key_from_id
from cdc_assets.sinks.mongodb.ranges import range_filter
from cdc_assets.sinks.mongodb.server import MongoTx, collection
from cdc_assets.sinks.mongodb.staging import task_write

COPY_BATCH = 1000  # staged documents per insert_many inside the commit transaction
ID_BATCH = 10_000  # `_id`s per $in


def staging_name(table: TableId, first_split: int) -> TableId:
    """Deterministic per table and first split, so a crashed run's staging collection is replaced."""
    digest = hashlib.sha256(str(table).encode()).hexdigest()[:10]
    return TableId(table.namespace, f"_cdc_stage_{table.name[:48]}_{digest}_{first_split}")


class StagingCollections:
    def __init__(self, client: MongoClient, url: DbUrl) -> None:
        self.client = client
        self.url = url
        self._staged: dict[TableId, tuple[TableId, tuple[str, ...]]] = {}  # staging -> (table, key)

    def name(self, table: TableId, first_split: int) -> TableId:
        staging = staging_name(table, first_split)
        self._staged[staging] = (table, ())
        return staging

    def create(self, staging: TableId, export: RowExport, key: tuple[str, ...]) -> None:
        """The key comes here, not with the write: Spark tasks need it to build each staged `_id`."""
        self._staged[staging] = (self._staged.get(staging, (staging, ()))[0], key)
        collection(self.client, staging).drop()
        self.client[staging.namespace].create_collection(staging.name)

    def write(self, staging: TableId, export: RowExport) -> TaskWrite:
        if not self._staged.get(staging, (None, ()))[1]:
            raise TableError(f"staging collection {staging} was not created by create_staging on {self.url}",
                             "call create_staging(staging, export, key) before staging_write")
        table, key = self._staged[staging]
        return task_write(self.url, staging, table, key, export)

    def staged_bytes(self, staging: TableId) -> int:
        stats = list(collection(self.client, staging).aggregate([{"$collStats": {"storageStats": {}}}]))
        if not stats:
            return 0
        storage = stats[0].get("storageStats", {})
        return int(storage.get("size", 0)) + int(storage.get("totalIndexSize", 0))

    def merge(self, tx: MongoTx, schema: TableSchema, staging: TableId, export: RowExport,
              replace: SplitRanges, counts: dict[int, int] | None = None) -> dict[int, int]:
        target, staged = collection(self.client, schema.table), collection(self.client, staging)
        if counts is None:
            counts = {int(d[ID]): int(d["n"]) for d in staged.aggregate(
                [{"$group": {ID: f"${SPLIT_COLUMN}", "n": {"$sum": 1}}}], session=tx.session)}
        if replace.by_range:
            target.delete_many(range_filter(schema, replace.ranges, replace.kind), session=tx.session)
        else:
            for ids in _batches((d[ID] for d in staged.find({}, {ID: 1}, session=tx.session)), ID_BATCH):
                target.delete_many({ID: {"$in": ids}}, session=tx.session)
        for documents in _batches(staged.find({}, {SPLIT_COLUMN: 0}, session=tx.session), COPY_BATCH):
            target.insert_many(documents, ordered=True, session=tx.session)
        return counts

    def unstaged_keys(self, tx: MongoTx, schema: TableSchema, staging: TableId, export: RowExport,
                      replace: SplitRanges) -> list[tuple]:
        """Keys the target holds in the splits' ranges by BSON's order that the group did not stage."""
        target, staged = collection(self.client, schema.table), collection(self.client, staging)
        out = []
        held = (d[ID] for d in target.find(range_filter(schema, replace.ranges, replace.kind), {ID: 1},
                                           session=tx.session))
        for ids in _batches(held, ID_BATCH):
            present = {repr(d[ID]) for d in staged.find({ID: {"$in": ids}}, {ID: 1}, session=tx.session)}
            out += [key_from_id(i, schema) for i in ids if repr(i) not in present]
        return out

    def drop(self, staging: TableId) -> None:
        collection(self.client, staging).drop()
        self._staged.pop(staging, None)


def _batches(items, size: int) -> Iterator[list]:
    batch: list = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
