"""The staging collection a group of splits is written into inside Spark tasks, before its commit.

A staged document is the target document plus the split index: {_id, _cdc_split, column: value, ...}, so the
commit counts rows per split and copies the documents in without converting anything again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Iterator

from pymongo import MongoClient
from pymongo.errors import BulkWriteError

from cdc_assets.core.boundary import SPLIT_COLUMN, RowExport, RowFormat, TaskWrite
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import TableError
from cdc_assets.sinks.mongodb.documents import DocumentValueError, to_document
from cdc_assets.sinks.mongodb.text_values import TextRefused, parse_text

INSERT_BATCH = 1000
DUPLICATE_KEY = 11000


@dataclass(frozen=True)
class StageTarget:
    """What a Spark task needs to write its partition; picklable. The URL holds the password: never in repr
    (a TaskWrite's partial may be printed by Spark or a log line)."""

    url: str = field(repr=False)
    database: str
    collection: str
    schema: TableSchema
    as_text: tuple[bool, ...]  # per table column, in schema order (the export's Transport.as_text)


def task_write(url: DbUrl, staging: TableId, table: TableId, key: tuple[str, ...], export: RowExport) -> TaskWrite:
    """The write Spark runs per partition: `stage_rows` with everything it needs bound, picklable."""
    if export.format is not RowFormat.COLUMNS:
        raise TableError(f"a MongoDB target stages {RowFormat.COLUMNS.value} rows, not {export.format.value} "
                         f"(table {table})", "the source must export the format the sink's target_format() names")
    schema = TableSchema(table, tuple(t.column for t in export.transports), key)
    target = StageTarget(url.render(masked=False), staging.namespace, staging.name, schema,
                         tuple(t.as_text for t in export.transports))
    return TaskWrite(partial(stage_rows, target))


def staged_document(target: StageTarget, values: tuple) -> dict:
    """One exported tuple (split index, then the table's columns) as its staged document."""
    split, *columns = values
    schema = target.schema
    row = {}
    for column, text, value in zip(schema.columns, target.as_text, columns):
        if text and value is not None:
            try:
                value = parse_text(column.kind, value)
            except TextRefused as exc:
                key = tuple(columns[[c.name for c in schema.columns].index(k)] for k in schema.primary_key)
                raise DocumentValueError(
                    f"row {key} of {schema.table}: column '{column.name}' ({column.native}) has no exact BSON form "
                    f"({exc})", "leave the column out with source.exclude_columns, or change the value on the source"
                ) from None
        row[column.name] = value
    document = to_document(row, schema)
    return {"_id": document.pop("_id"), SPLIT_COLUMN: int(split), **document}


def stage_rows(target: StageTarget, rows: Iterator[tuple]) -> int:
    """A TaskWrite: one partition's tuples into the staging collection, unordered batches of INSERT_BATCH."""
    written = 0
    client: MongoClient = MongoClient(target.url)
    try:
        staging = client[target.database][target.collection]
        batch: list[dict] = []
        for values in rows:
            batch.append(staged_document(target, values))
            if len(batch) >= INSERT_BATCH:
                written += _insert(staging, batch)
                batch = []
        if batch:
            written += _insert(staging, batch)
    finally:
        client.close()
    return written


def _insert(staging, batch: list[dict]) -> int:
    """A retried Spark task stages again what its failed attempt already wrote: those duplicate keys are fine
    (either copy was read after the group's low watermark, which the log replays from); any other error is not."""
    try:
        staging.insert_many(batch, ordered=False)
    except BulkWriteError as exc:
        others = [e for e in exc.details.get("writeErrors", []) if e.get("code") != DUPLICATE_KEY]
        if others or exc.details.get("writeConcernErrors"):
            raise
    return len(batch)
