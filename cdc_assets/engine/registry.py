"""Which classes serve a `db_type`: one table, so a new engine is one entry, and an unknown one is named, not guessed."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

from cdc_assets.core.boundary import Log, Sink, SnapshotSource
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import ConfigError
from cdc_assets.resumer.records import PositionRecord
from cdc_assets.resumer.sql import SqlPositionStore
from cdc_assets.resumer.store import PositionStore
from cdc_assets.sinks.mongodb.positions import MongoPositionStore
from cdc_assets.sinks.mongodb.sink import MongoSink
from cdc_assets.sinks.mysql import MysqlSink
from cdc_assets.sinks.postgres import PostgresSink
from cdc_assets.sources.mongodb.log import MongoLog
from cdc_assets.sources.mongodb.source import MongoSource
from cdc_assets.sources.mysql.log import MysqlLog
from cdc_assets.sources.mysql.savepoint_binlog import MysqlSavepointLog
from cdc_assets.sources.mysql.source import MysqlSource
from cdc_assets.sources.postgres.log import PostgresLog
from cdc_assets.sources.postgres.savepoint_slots import PgSavepointSlots
from cdc_assets.sources.postgres.source import PostgresSource


@dataclass(frozen=True)
class SourceEngine:
    # (url, pipe=snapshot.pipe, **source.engine_options): a MongoDB source takes its collections
    snapshot: Callable[..., SnapshotSource]
    log: Callable[[DbUrl, str], Log]  # (url, task_id)


SOURCES: dict[str, SourceEngine] = {
    "mysql": SourceEngine(MysqlSource, MysqlLog),
    "postgres": SourceEngine(PostgresSource, PostgresLog),
    "mongo": SourceEngine(MongoSource, MongoLog),
}
# A savepoint's hold on the source's log: (url, task_id, the target's position key, the task's Log) ->
# create/check/restore/repair/drop
SAVEPOINT_LOGS: dict[str, Callable] = {
    "mysql": MysqlSavepointLog,
    "postgres": PgSavepointSlots,
}
# (url, the source's db_type, write_batch_size=rows per staging write batch where the sink batches)
SINKS: dict[str, Callable[..., Sink]] = {
    "mysql": MysqlSink,
    "postgres": PostgresSink,
    "mongo": MongoSink,
}


def source_engine(db_type: str) -> SourceEngine:
    if db_type not in SOURCES:
        raise ConfigError(f"no source for db_type {db_type!r}", f"use one of {sorted(SOURCES)}")
    return SOURCES[db_type]


def sink_factory(db_type: str) -> Callable[..., Sink]:
    if db_type not in SINKS:
        raise ConfigError(f"no target for db_type {db_type!r}", f"use one of {sorted(SINKS)}")
    return SINKS[db_type]


# Position tables in a database (`from_target`, `from_db`): (url, table full name, resume type). The MongoDB store
# lives beside its sink (only sinks/mongodb may import pymongo) and is handed the record type it cannot import.
POSITION_STORES: dict[str, Callable[[DbUrl, str, str], PositionStore]] = {
    "mysql": SqlPositionStore,
    "postgres": SqlPositionStore,
    "mongo": partial(MongoPositionStore, record=PositionRecord),
}


def position_store_factory(db_type: str) -> Callable[[DbUrl, str, str], PositionStore]:
    if db_type not in POSITION_STORES:
        raise ConfigError(f"no position table for db_type {db_type!r}", f"use one of {sorted(POSITION_STORES)}")
    return POSITION_STORES[db_type]


def savepoint_log(db_type: str) -> Callable:
    if db_type not in SAVEPOINT_LOGS:
        raise ConfigError(f"savepoints are not supported for a {db_type!r} source", f"use one of {sorted(SAVEPOINT_LOGS)}")
    return SAVEPOINT_LOGS[db_type]
