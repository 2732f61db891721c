"""Everything one task needs at run time, opened lazily from its config and closed once."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

from cdc_assets.config import TargetConfig, TaskConfig
from cdc_assets.core.boundary import Log, Sink, SnapshotSource
from cdc_assets.core.commit_policy import CommitPolicy
from cdc_assets.engine.plans import PlanStore
from cdc_assets.errors import ConfigError
from cdc_assets.engine.registry import sink_factory, source_engine
from cdc_assets.engine.resumer_stores import open_resumer
from cdc_assets.resumer.resumer import Resumer


@dataclass
class PhaseHooks:
    """Called at the watermarks, so tests can change the source or crash at a chosen point."""

    after_low: Callable[[list[str]], None] | None = None
    after_write: Callable[[list[str]], None] | None = None
    after_high: Callable[[list[str]], None] | None = None


class TaskRuntime:
    """A task at run time, seen through one of its targets (`target`, the first unless given): `sink` and
    `resumer` are that target's. With several targets, `lanes` holds one runtime per target; they share the
    source, the log, the plans and Spark of the runtime that made them."""

    def __init__(self, config: TaskConfig, hooks: PhaseHooks | None = None, target: TargetConfig | None = None,
                 parent: "TaskRuntime | None" = None) -> None:
        self.config = config
        self.hooks = hooks or PhaseHooks()
        self.target = target or config.targets[0]
        self.parent = parent
        self.plans = parent.plans if parent else PlanStore(config.data_dir, config.task_id)
        self.capture_notes: list[str] = []  # for the plan/snapshot output: log retention, warnings, kept plans
        self._spark = None
        self._owns_spark = False

    @cached_property
    def lanes(self) -> list["TaskRuntime"]:
        """One runtime per target, in config order; this one stands for its own target."""
        if self.parent is not None:
            return self.parent.lanes
        return [self if t is self.target else TaskRuntime(self.config, self.hooks, t, parent=self)
                for t in self.config.targets]

    def lanes_named(self, names: list[str] | None) -> list["TaskRuntime"]:
        """The lanes of the targets named (every one when none is)."""
        unknown = sorted(set(names or ()) - {lane.name for lane in self.lanes})
        if unknown:
            raise ConfigError(f"not a target of task {self.config.task_id}: {', '.join(unknown)}",
                              f"name one of {', '.join(lane.name for lane in self.lanes)}")
        return [lane for lane in self.lanes if not names or lane.name in names]

    @property
    def policy(self) -> CommitPolicy:
        return CommitPolicy.parse(self.config.pipeline.commit_policy, {t.name: t.required for t in self.config.targets})

    def one_target(self, doing: str) -> None:
        """Refuse what is not built for several targets yet, rather than do it to the first one only."""
        if len(self.config.targets) > 1:
            raise ConfigError(f"{doing} works on a task with one target; task {self.config.task_id} has "
                              f"{len(self.config.targets)} ({', '.join(t.name for t in self.config.targets)})",
                              "run it on a task file that names one of the targets as its only target")

    @property
    def name(self) -> str:
        """The target's name, as logs, errors and metadata call it."""
        return self.target.name

    @property
    def position_key(self) -> str:
        """Whose records the position store holds: the task's id for the first target (as before it had several),
        `<task>.<target>` for the others."""
        if self.target is self.config.targets[0]:
            return self.config.task_id
        return f"{self.config.task_id}.{self.target.name}"

    @cached_property
    def source(self) -> SnapshotSource:
        if self.parent is not None:
            return self.parent.source
        url = self.config.source.db_url
        return source_engine(url.db_type).snapshot(url, pipe=self.config.snapshot.pipe,
                                                   **self.config.source.engine_options)

    @cached_property
    def log(self) -> Log:
        if self.parent is not None:
            return self.parent.log
        url = self.config.source.db_url
        return source_engine(url.db_type).log(url, self.config.task_id)

    @cached_property
    def sink(self) -> Sink:
        url = self.target.db_url
        return sink_factory(url.db_type)(url, self.config.source.db_type,
                                         write_batch_size=self.config.snapshot.write_batch_size)

    @cached_property
    def resumer(self) -> Resumer:
        return open_resumer(self.config, self.target, self.position_key)

    @property
    def spark(self):
        if self.parent is not None:
            return self.parent.spark
        if self._spark is None:
            # Spark starts in seconds: only when reading
            from cdc_assets.spark.session import build_session
            from cdc_assets.spark.warm_up import warm_up_source

            self._spark, self._owns_spark = build_session(self.config.spark, app_name=f"cdc_assets:{self.config.task_id}")
            if self._owns_spark:
                warm_up_source(self._spark, self.source, self.snapshot_reads_jdbc)
        return self._spark

    @property
    def snapshot_reads_jdbc(self) -> bool:
        """Whether the snapshot reads the source through Spark JDBC: not where one PostgreSQL target takes the
        source's splits piped into its staging `COPY` (the source's `pipes_copy`), where the JDBC warm-up (the
        driver's classes and a query) would warm a read that never happens."""
        return not (len(self.lanes) == 1 and self.source.pipes_copy(self.lanes[0].sink.target_format()))

    def adopt_spark(self, session, started: bool = False) -> None:
        """Use a session someone else owns (tests, the Dagster resource) instead of starting one; `started`: it is
        new, so its first-job costs are paid here, before the first split's read."""
        self._spark, self._owns_spark = session, False
        if started:
            from cdc_assets.spark.warm_up import warm_up_source

            warm_up_source(session, self.source, self.snapshot_reads_jdbc)

    def close(self) -> None:
        self.reconnect()
        self.__dict__.pop("lanes", None)
        self.__dict__.pop("log", None)
        if self._spark is not None and self._owns_spark:
            from cdc_assets.spark.session import stop_session

            stop_session(self._spark)
        self._spark, self._owns_spark = None, False

    def reconnect(self) -> None:
        """Close the source, sinks and position stores; they reopen on next use (after a lost connection)."""
        if self.parent is None:
            for lane in self.__dict__.get("lanes", []):
                if lane is not self:
                    lane.reconnect()
        else:  # the parent's: forget them, the parent closes them
            self.__dict__.pop("source", None)
            self.__dict__.pop("log", None)
        for name in ("sink", "resumer") if self.parent else ("source", "sink", "resumer"):
            if name in self.__dict__:
                try:
                    self.__dict__.pop(name).close()
                except Exception:  # a connection that is already gone cannot be closed cleanly
                    pass

    def describe_store(self) -> str:
        return self.resumer.store.describe() + f"; logs in {self.config.log_dir}"
