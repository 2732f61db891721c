"""Positions in a MongoDB target (`resumer: {resume_type: from_target}`): the records of resumer/sql.py in a
collection, `cdc_assets_meta.task_position` unless named, unique on (task_id, resumer_type, position_key).

`position_data` is kept as the same JSON text the SQL tables hold, so both read back identically. `write_in`
runs inside the sink's commit transaction (`tx.session`), so a split's documents and its finished marker, or a
log batch and its checkpoint, commit together or not at all. That needs transactions: a standalone server is
refused here, naming the way out.

sinks/ may not import resumer/ (import contract): records are read by their fields, and `load` builds them with the
record class the runtime hands in (`resumer.records.PositionRecord`).
"""
from __future__ import annotations

import json
from typing import Any, Callable, Sequence

from pymongo import ASCENDING, UpdateOne

from cdc_assets.core.urls import DbUrl
from cdc_assets.sinks.mongodb.server import META_DATABASE, connect, require_transactions

KEY_FIELDS = ("task_id", "resumer_type", "position_key")


Record = Any  # resumer.records.PositionRecord: task_id, resumer_type, position_key, data_json, updated_at


def upserts(records: Sequence[Record]) -> list[UpdateOne]:
    return [UpdateOne({"task_id": r.task_id, "resumer_type": r.resumer_type, "position_key": r.position_key},
                      {"$set": {"position_data": r.data_json, "updated_at": r.updated_at},
                       "$setOnInsert": {"created_at": r.updated_at}}, upsert=True)
            for r in records]


def load_filter(task_id: str, resumer_type: str | None, keys: Sequence[str] | None) -> dict:
    where: dict = {"task_id": task_id}
    if resumer_type is not None:
        where["resumer_type"] = resumer_type
        if keys is not None:
            where["position_key"] = {"$in": list(keys)}
    return where


class MongoPositionStore:
    def __init__(self, url: DbUrl, table_full_name: str, resume_type: str, record: Callable[..., Record]) -> None:
        database, _, name = table_full_name.partition(".")
        if not name:
            database, name = META_DATABASE, database
        self.url = url
        self.resume_type = resume_type
        self.record = record
        self.client = connect(url)
        require_transactions(self.client, url, f"resumer.resume_type {resume_type}")
        self.name = f"{database}.{name}"
        self.collection = self.client[database][name]
        self.collection.create_index([(f, ASCENDING) for f in KEY_FIELDS], unique=True, name="task_position_key")

    def write_in(self, tx, records: Sequence[Record]) -> None:
        if records:
            self.collection.bulk_write(upserts(records), ordered=True, session=tx.session)

    def put(self, records: Sequence[Record]) -> None:
        if not records:
            return
        with self.client.start_session() as session:
            session.with_transaction(lambda s: self.collection.bulk_write(upserts(records), ordered=True, session=s))

    def load(self, task_id: str, resumer_type: str | None = None,
             keys: Sequence[str] | None = None) -> list[Record]:
        if keys is not None and not keys and resumer_type is not None:
            return []
        # ObjectIds grow with insertion, as the SQL tables' ids do: the same order.
        found = self.collection.find(load_filter(task_id, resumer_type, keys)).sort("_id", ASCENDING)
        return [self.record(d["task_id"], d["resumer_type"], d["position_key"], json.loads(d["position_data"]),
                               d["updated_at"]) for d in found]

    def clear(self, task_id: str) -> None:
        self.collection.delete_many({"task_id": task_id})

    def close(self) -> None:
        self.client.close()

    def describe(self) -> str:
        return f"collection {self.name} in {self.url}"
