"""A group of splits as Spark tasks that read MongoDB with pymongo (there is no JDBC driver to do it): one task per
split, each reading its `_id` range along the index and handing out rows in the format the target asked for.

    COPY_TEXT  one string column `line`: the split index, then each column (copy_text.py)
    COLUMNS    `_cdc_split int`, then one column per table column: booleans, integers, doubles, strings and bytes
               typed; decimals, dates, date-times, UUIDs and JSON as text the target parses (decimals may exceed
               Spark's 38 digits, and text keeps date-times clear of Spark's session time zone)
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Iterator

from cdc_assets.core.boundary import SPLIT_COLUMN, RowExport, RowFormat, TargetFormat, TaskExport, Transport
from cdc_assets.core.splits import KeyRange, Split
from cdc_assets.core.tables import Column, Kind, TableSchema
from cdc_assets.sources.mongodb import copy_text
from cdc_assets.sources.mongodb.collections import ID, CollectionSpec
from cdc_assets.sources.mongodb.values import ejson, to_row

LINE_DDL = "line string"
_TYPED = {Kind.BOOL: "boolean", Kind.INT: "bigint", Kind.FLOAT64: "double", Kind.STRING: "string",
          Kind.BINARY: "binary"}


@dataclass(frozen=True)
class SplitTask:
    """What one Spark task needs to read one split: picklable, and holding the password (never printed)."""

    url: str = field(repr=False)
    spec: CollectionSpec
    index: int
    range: KeyRange
    format: RowFormat
    transports: tuple[Transport, ...]
    batch_size: int = 1000


def transports(schema: TableSchema, rows: RowFormat) -> tuple[Transport, ...]:
    """COPY text is parsed by the target into typed staging columns; COLUMNS carry what Spark cannot as text."""
    return tuple(Transport(c, rows is RowFormat.COLUMNS and c.kind not in _TYPED) for c in schema.columns)


def spark_ddl(rows: RowFormat, carried: tuple[Transport, ...]) -> str:
    if rows is RowFormat.COPY_TEXT:
        return LINE_DDL
    columns = [f"`{t.column.name}` {'string' if t.as_text else _TYPED[t.column.kind]}" for t in carried]
    return ", ".join([f"{SPLIT_COLUMN} int", *columns])


def row_export(url: str, spec: CollectionSpec, schema: TableSchema, splits: list[Split], target: TargetFormat
               ) -> RowExport:
    carried = transports(schema, target.rows)
    tasks = tuple(SplitTask(url, spec, s.index, s.range, target.rows, carried) for s in splits)
    return RowExport(target.rows, TaskExport(tasks, read_task, spark_ddl(target.rows, carried)), carried)


def read_task(task: SplitTask) -> Iterator[tuple]:
    """Runs on a Spark executor: the split's documents as rows (raises BsonValueError / NotRenderable naming the
    document and field a column cannot hold)."""
    from cdc_assets.sources.mongodb.server import connect, read_split  # pymongo loads on the executor

    client = connect(task.url)
    try:
        for document in read_split(client, task.spec.table, task.range, task.batch_size):
            yield render(task, to_row(document, task.spec), document.get(ID))
    finally:
        client.close()


def render(task: SplitTask, row: dict, key: object) -> tuple:
    """One row in the task's format; `key` is the document's `_id`, for errors."""
    columns = tuple(t.column for t in task.transports)
    if task.format is RowFormat.COPY_TEXT:
        return (copy_text.line(task.index, row, columns, task.spec.table, ejson(key)),)
    return (task.index, *(_column_value(row.get(t.column.name), t) for t in task.transports))


def _column_value(value: object, transport: Transport) -> object:
    if value is None or not transport.as_text:
        return value
    return as_text(value, transport.column)


def as_text(value: object, column: Column) -> str:
    """The text a target parses back into the column's type exactly (MySQL reads these forms on insert)."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="microseconds")  # naive UTC, as values.py made it
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)
