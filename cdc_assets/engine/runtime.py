"""Everything one task needs at run time, opened lazily from its config and closed once."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

from cdc_assets.config import DbResumer, LogResumer, SqliteResumer, TargetResumer, TaskConfig
from cdc_assets.core.boundary import Log, Sink, SnapshotSource
from cdc_assets.core.urls import DbUrl
from cdc_assets.engine.plans import PlanStore
from cdc_assets.engine.registry import position_store_factory, sink_factory, source_engine
from cdc_assets.resumer.logfile import PositionLog
from cdc_assets.resumer.resumer import Resumer
from cdc_assets.resumer.sqlite import SqlitePositionStore


@dataclass
class PhaseHooks:
    """Called at the watermarks, so tests can change the source or crash at a chosen point."""

    after_low: Callable[[list[str]], None] | None = None
    after_write: Callable[[list[str]], None] | None = None
    after_high: Callable[[list[str]], None] | None = None


class TaskRuntime:
    def __init__(self, config: TaskConfig, hooks: PhaseHooks | None = None) -> None:
        self.config = config
        self.hooks = hooks or PhaseHooks()
        self.plans = PlanStore(config.data_dir, config.task_id)
        self.capture_notes: list[str] = []  # the source's capture check: log retention, warnings
        self._spark = None
        self._owns_spark = False

    @cached_property
    def source(self) -> SnapshotSource:
        url = self.config.source.db_url
        return source_engine(url.db_type).snapshot(url, **self.config.source.engine_options)

    @cached_property
    def log(self) -> Log:
        url = self.config.source.db_url
        return source_engine(url.db_type).log(url, self.config.task_id)

    @cached_property
    def sink(self) -> Sink:
        url = self.config.target.db_url
        return sink_factory(url.db_type)(url, self.config.source.db_type,
                                         write_batch_size=self.config.snapshot.write_batch_size)

    @cached_property
    def resumer(self) -> Resumer:
        log = PositionLog(self.config.log_dir)
        r = self.config.resumer
        if isinstance(r, SqliteResumer):
            store = SqlitePositionStore(r.path or self.config.data_dir / "positions.sqlite")
        elif isinstance(r, TargetResumer):
            url = self.config.target.db_url
            store = position_store_factory(url.db_type)(url, r.table_full_name, "from_target")
        elif isinstance(r, DbResumer):
            url = DbUrl.parse(r.url, "resumer.url")
            store = position_store_factory(url.db_type)(url, r.table_full_name, "from_db")
        elif isinstance(r, LogResumer):
            store = log if r.log_dir is None else PositionLog(r.log_dir)
            log = store
        return Resumer(self.config.task_id, store, log, self.config.source.db_type)

    @property
    def spark(self):
        if self._spark is None:
            from cdc_assets.spark.session import build_session, warm_up_source  # Spark starts in seconds: only when reading

            self._spark, self._owns_spark = build_session(self.config.spark, app_name=f"cdc_assets:{self.config.task_id}")
            if self._owns_spark:
                warm_up_source(self._spark, self.source)
        return self._spark

    def adopt_spark(self, session, started: bool = False) -> None:
        """Use a session someone else owns (tests, the Dagster resource) instead of starting one; `started`: it is
        new, so its first-job costs are paid here, before the first split's read."""
        self._spark, self._owns_spark = session, False
        if started:
            from cdc_assets.spark.session import warm_up_source

            warm_up_source(session, self.source)

    def close(self) -> None:
        self.reconnect()
        self.__dict__.pop("log", None)
        if self._spark is not None and self._owns_spark:
            self._spark.stop()
        self._spark, self._owns_spark = None, False

    def reconnect(self) -> None:
        """Close the source, sink and position store; they reopen on next use (after a lost connection)."""
        for name in ("source", "sink", "resumer"):
            if name in self.__dict__:
                try:
                    self.__dict__.pop(name).close()
                except Exception:  # a connection that is already gone cannot be closed cleanly
                    pass

    def describe_store(self) -> str:
        return self.resumer.store.describe() + f"; logs in {self.config.log_dir}"
