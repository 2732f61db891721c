"""Everything one task needs at run time, opened lazily from its config and closed once.

Two types, one per what there is one of: a `Task` (the config, the plans, the source, its log and Spark: one per
task) and a `TaskRuntime`, the task seen through one of its targets (that target's sink, resumer and position
key: one per target). Every lane of a task is a `TaskRuntime` over the same `Task`, so an engine function that
takes "the task seen through a target" reads the same for one target or several.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from cdc_assets.config import TargetConfig, TaskConfig
from cdc_assets.core.boundary import Log, Sink, SnapshotSource
from cdc_assets.core.commit_policy import CommitPolicy
from cdc_assets.engine.plans import PlanStore
from cdc_assets.engine.registry import sink_factory, source_engine
from cdc_assets.engine.resumer_stores import open_resumer
from cdc_assets.errors import ConfigError
from cdc_assets.resumer.resumer import Resumer


@dataclass
class PhaseHooks:
    """Called at the watermarks, so tests can change the source or crash at a chosen point."""

    after_low: Callable[[list[str]], None] | None = None
    after_write: Callable[[list[str]], None] | None = None
    after_high: Callable[[list[str]], None] | None = None


def _close_quietly(resource) -> None:
    if resource is not None:
        try:
            resource.close()
        except Exception:  # a connection that is already gone cannot be closed cleanly
            pass


class Task:
    """What the targets of one task share: its config, hooks, plans and capture notes, the source, its log and
    the Spark session, each opened on first use."""

    def __init__(self, config: TaskConfig, hooks: PhaseHooks | None = None) -> None:
        self.config = config
        self.hooks = hooks or PhaseHooks()
        self.plans = PlanStore(config.data_dir, config.task_id)
        self.capture_notes: list[str] = []  # for the plan/snapshot output: log retention, warnings, kept plans
        self.lanes: list[TaskRuntime] = []  # one per target, in config order, once asked for
        self._source: SnapshotSource | None = None
        self._log: Log | None = None
        self._spark = None
        self._owns_spark = False

    @property
    def source(self) -> SnapshotSource:
        if self._source is None:
            url = self.config.source.db_url
            self._source = source_engine(url.db_type).snapshot(url, pipe=self.config.snapshot.pipe,
                                                               **self.config.source.engine_options)
        return self._source

    @property
    def log(self) -> Log:
        if self._log is None:
            url = self.config.source.db_url
            self._log = source_engine(url.db_type).log(url, self.config.task_id)
        return self._log

    def spark(self, reads_jdbc: Callable[[], bool]):
        if self._spark is None:
            # Spark starts in seconds: only when reading
            from cdc_assets.spark.session import build_session
            from cdc_assets.spark.warm_up import warm_up_source

            self._spark, self._owns_spark = build_session(self.config.spark,
                                                          app_name=f"cdc_assets:{self.config.task_id}")
            if self._owns_spark:
                warm_up_source(self._spark, self.source, reads_jdbc())
        return self._spark

    def adopt_spark(self, session) -> None:
        self._spark, self._owns_spark = session, False

    def reconnect(self) -> None:
        """Close the source and every lane's sink and position store; they reopen on next use."""
        for lane in self.lanes:
            lane.reconnect_target()
        _close_quietly(self._source)
        self._source = None

    def close(self) -> None:
        self.reconnect()
        self.lanes = []
        self._log = None  # holds no connection between reads: each reader opens and closes its own
        if self._spark is not None and self._owns_spark:
            from cdc_assets.spark.session import stop_session

            stop_session(self._spark)
        self._spark, self._owns_spark = None, False


class TaskRuntime:
    """A task at run time, seen through one of its targets (`target`, the first unless given): `sink`,
    `resumer` and `position_key` are that target's; the rest is the task's (`task`), shared by its `lanes`."""

    def __init__(self, config: TaskConfig, hooks: PhaseHooks | None = None, target: TargetConfig | None = None,
                 task: Task | None = None) -> None:
        self.task = task or Task(config, hooks)
        self.target = target or config.targets[0]
        self._sink: Sink | None = None
        self._resumer: Resumer | None = None

    config = property(lambda self: self.task.config)
    hooks = property(lambda self: self.task.hooks)
    plans = property(lambda self: self.task.plans)
    source = property(lambda self: self.task.source)
    log = property(lambda self: self.task.log)

    @property
    def capture_notes(self) -> list[str]:
        return self.task.capture_notes

    @capture_notes.setter
    def capture_notes(self, notes: list[str]) -> None:
        self.task.capture_notes = notes

    @property
    def lanes(self) -> list["TaskRuntime"]:
        """One runtime per target, in config order, over this one's task; this one stands for its own target."""
        if not self.task.lanes:
            self.task.lanes = [self if t is self.target else TaskRuntime(self.config, target=t, task=self.task)
                               for t in self.config.targets]
        return self.task.lanes

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

    @property
    def sink(self) -> Sink:
        if self._sink is None:
            url = self.target.db_url
            self._sink = sink_factory(url.db_type)(url, self.config.source.db_type,
                                                   write_batch_size=self.config.snapshot.write_batch_size)
        return self._sink

    @property
    def resumer(self) -> Resumer:
        if self._resumer is None:
            self._resumer = open_resumer(self.config, self.target, self.position_key)
        return self._resumer

    def opened(self) -> list[str]:
        """What of this target is open now: "sink", "resumer"."""
        return [name for name, part in (("sink", self._sink), ("resumer", self._resumer)) if part is not None]

    @property
    def spark(self):
        return self.task.spark(lambda: self.snapshot_reads_jdbc)

    @property
    def snapshot_reads_jdbc(self) -> bool:
        """Whether the snapshot reads the source through Spark JDBC: not where one PostgreSQL target takes the
        source's splits piped into its staging `COPY` (the source's `pipes_copy`), where the JDBC warm-up (the
        driver's classes and a query) would warm a read that never happens."""
        return not (len(self.lanes) == 1 and self.source.pipes_copy(self.lanes[0].sink.target_format()))

    def adopt_spark(self, session, started: bool = False) -> None:
        """Use a session someone else owns (tests, the Dagster resource) instead of starting one; `started`: it is
        new, so its first-job costs are paid here, before the first split's read."""
        self.task.adopt_spark(session)
        if started:
            from cdc_assets.spark.warm_up import warm_up_source

            warm_up_source(session, self.source, self.snapshot_reads_jdbc)

    def close(self) -> None:
        """The whole task: every lane's connections, the source, and Spark where the task started it."""
        self.reconnect_target()
        self.task.close()

    def reconnect(self) -> None:
        """Close the source, sinks and position stores; they reopen on next use (after a lost connection)."""
        self.reconnect_target()
        self.task.reconnect()

    def reconnect_target(self) -> None:
        """Close this target's sink and position store only; they reopen on next use."""
        _close_quietly(self._sink)
        _close_quietly(self._resumer)
        self._sink = self._resumer = None

    def describe_store(self) -> str:
        return self.resumer.store.describe() + f"; logs in {self.config.log_dir}"
