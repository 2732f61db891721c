"""Which classes serve a `db_type`: one table, so a new engine is one entry, and an unknown one is named, not guessed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from cdc_assets.core.boundary import Log
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import ConfigError
from cdc_assets.sinks.base import SqlSink
from cdc_assets.sinks.mongodb.sink import MongoSink
from cdc_assets.sinks.mysql import MysqlSink
from cdc_assets.sinks.postgres import PostgresSink
from cdc_assets.sources.base import Source
from cdc_assets.sources.mysql.log import MysqlLog
from cdc_assets.sources.mysql.source import MysqlSource
from cdc_assets.sources.postgres.log import PostgresLog
from cdc_assets.sources.postgres.source import PostgresSource


@dataclass(frozen=True)
class SourceEngine:
    snapshot: Callable[[DbUrl], Source]
    log: Callable[[DbUrl, str], Log]  # (url, task_id)


SOURCES: dict[str, SourceEngine] = {
    "mysql": SourceEngine(MysqlSource, MysqlLog),
    "postgres": SourceEngine(PostgresSource, PostgresLog),
}
SINKS: dict[str, Callable[[DbUrl, str], SqlSink]] = {  # (url, the source's db_type)
    "mysql": MysqlSink,
    "postgres": PostgresSink,
    "mongo": MongoSink,
}


def source_engine(db_type: str) -> SourceEngine:
    if db_type not in SOURCES:
        raise ConfigError(f"no source for db_type {db_type!r}", f"use one of {sorted(SOURCES)}")
    return SOURCES[db_type]


def sink_factory(db_type: str) -> Callable[[DbUrl, str], SqlSink]:
    if db_type not in SINKS:
        raise ConfigError(f"no target for db_type {db_type!r}", f"use one of {sorted(SINKS)}")
    return SINKS[db_type]
