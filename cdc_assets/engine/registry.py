"""Which classes serve a `db_type`: one table, so a new engine is one entry, and an unknown one is named, not guessed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from cdc_assets.core.boundary import Log
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import ConfigError
from cdc_assets.sinks.base import SqlSink
from cdc_assets.sinks.mysql import MysqlSink
from cdc_assets.sinks.postgres import PostgresSink
from cdc_assets.sources.base import Source
from cdc_assets.sources.mysql.log import MysqlLog
from cdc_assets.sources.mysql.savepoint_binlog import MysqlSavepointLog
from cdc_assets.sources.mysql.source import MysqlSource
from cdc_assets.sources.postgres.log import PostgresLog
from cdc_assets.sources.postgres.savepoint_slots import PgSavepointSlots
from cdc_assets.sources.postgres.source import PostgresSource


@dataclass(frozen=True)
class SourceEngine:
    snapshot: Callable[[DbUrl], Source]
    log: Callable[[DbUrl, str], Log]  # (url, task_id)


SOURCES: dict[str, SourceEngine] = {
    "mysql": SourceEngine(MysqlSource, MysqlLog),
    "postgres": SourceEngine(PostgresSource, PostgresLog),
}
# A savepoint's hold on the source's log: (url, task_id, the task's Log) -> create/check/restore/repair/drop
SAVEPOINT_LOGS: dict[str, Callable] = {
    "mysql": MysqlSavepointLog,
    "postgres": PgSavepointSlots,
}
SINKS: dict[str, Callable[[DbUrl, str], SqlSink]] = {  # (url, the source's db_type)
    "mysql": MysqlSink,
    "postgres": PostgresSink,
}


def source_engine(db_type: str) -> SourceEngine:
    if db_type not in SOURCES:
        raise ConfigError(f"no source for db_type {db_type!r}", f"use one of {sorted(SOURCES)}")
    return SOURCES[db_type]


def sink_factory(db_type: str) -> Callable[[DbUrl, str], SqlSink]:
    if db_type not in SINKS:
        raise ConfigError(f"no target for db_type {db_type!r}", f"use one of {sorted(SINKS)}")
    return SINKS[db_type]


def savepoint_log(db_type: str) -> Callable:
    if db_type not in SAVEPOINT_LOGS:
        raise ConfigError(f"savepoints are not supported for a {db_type!r} source", f"use one of {sorted(SAVEPOINT_LOGS)}")
    return SAVEPOINT_LOGS[db_type]
