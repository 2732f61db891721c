"""`cdc-assets snapshot`: materialize every unfinished split through Dagster's execution API, in
contiguous partition ranges of at most `partitions_per_run`, sharing one Spark session."""
from __future__ import annotations

import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable

import dagster as dg

from cdc_assets import interrupts
from cdc_assets.config import TaskConfig
from cdc_assets.core.splits import SplitPlan
from cdc_assets.defs.assets import table_asset
from cdc_assets.defs.partitions import register
from cdc_assets.defs.resources import CdcTask, lent, task_spark
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.log_start import task_progress
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.target_down import answering

RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}  # the report says what matters


@dataclass
class TableReport:
    table: str
    splits: int
    finished: int
    rows: int
    seconds: float
    failures: list[str] = field(default_factory=list)
    runs: int = 0  # runs started for its unfinished splits


@dataclass
class SnapshotReport:
    tables: list[TableReport]
    positions: str
    capture_notes: list[str] = field(default_factory=list)  # the source's log retention and warnings
    unanswered: dict[str, str] = field(default_factory=dict)  # targets down when the finished splits were read

    @property
    def unfinished(self) -> int:
        return sum(t.splits - t.finished for t in self.tables)

    def lines(self) -> list[str]:
        out = []
        for t in self.tables:
            rate = f"{t.rows / t.seconds:,.0f} rows/s" if t.seconds > 0 else "nothing read in this run"
            out.append(f"{t.table}: {t.finished}/{t.splits} splits finished, {t.rows:,} rows, {t.seconds:.1f} s, {rate}")
        out.append(f"positions: {self.positions}")
        return out + self.capture_notes

    def reason(self) -> str:
        bad = [t for t in self.tables if t.finished < t.splits]
        first = next((f for t in bad for f in t.failures), None) or self._why_no_failure(bad)
        return (f"{self.unfinished} splits unfinished in {', '.join(t.table for t in bad)}; first failure: {first}; "
                "run `cdc-assets snapshot` again to retry them")


    def _why_no_failure(self, bad: list[TableReport]) -> str:
        idle = [t.table for t in bad if not t.runs]
        if not idle:
            return "see the run logs"
        down = "; ".join(f"target {name} did not answer: {why}" for name, why in self.unanswered.items())
        return (f"no run was started for {', '.join(idle)}: the targets that answered have every split finished, "
                "but the commit policy does not count them finished" + (f" ({down})" if down else ""))


def run_snapshot(config: TaskConfig, config_path: str, instance: dg.DagsterInstance,
                 spark_ready: Callable[[], None] = lambda: None) -> SnapshotReport:
    """`spark_ready`: returns once a session started early (the CLI's) is up, or failed to start. One runtime for
    the whole command, lent to the runs (defs/resources.py `lent`); only the table assets are built."""
    runtime = TaskRuntime(config)
    try:
        plans = [p.plan for p in ensure_plans(runtime)]
        register(instance, config.task_id, plans)
        finished, unanswered = finished_everywhere(runtime, plans)  # a split some target lacks is materialized again
        positions, notes = runtime.describe_store(), list(runtime.capture_notes)
        runtime.reconnect()  # the runs open their own connections; these would idle through them
        resources = {"cdc_task": CdcTask(config_path=config_path),
                     "pyspark": task_spark(config, stop_on_teardown=False)}
        reports = []
        try:
            spark_ready()
            with lent(runtime, config_path):
                for plan in plans:
                    reports.append(_snapshot_table(instance, table_asset(config, plan.table), resources, plan,
                                                   finished, config.snapshot.partitions_per_run))
        finally:
            _stop_spark()
        done = runtime.resumer.finished()
        progress = {str(table): count for table, count, _ in task_progress(runtime)}
        report = SnapshotReport(reports, positions, notes, unanswered)
    finally:
        runtime.close()
    for table, plan in zip(report.tables, plans):
        ids = [s.id for s in plan.splits]
        table.finished = progress.get(table.table, 0)  # with several targets: where the commit policy is met
        table.rows = sum(int(done[s].position_data.get("rows", 0)) for s in ids
                         if s in done and done[s].position_data.get("plan_id") == plan.plan_id)
    return report


def cli_instance(home: Path) -> dg.DagsterInstance:
    """The instance at `home` as `DagsterInstance.get()` makes it, but for the copy of the runs' stdout/stderr into
    compute logs: the CLI's runs print to its own terminal, and the copy starts a `tail` and a Python watcher per
    stream and run, which a Ctrl-C at that terminal reaches too (each printing its traceback)."""
    from dagster._core.instance.ref import InstanceRef

    ref = InstanceRef.from_dir(str(home), overrides={"compute_logs": {
        "module": "dagster._core.storage.noop_compute_log_manager", "class": "NoOpComputeLogManager"}})
    return dg.DagsterInstance.from_ref(ref)


def finished_everywhere(runtime: TaskRuntime, plans: list[SplitPlan]) -> tuple[set[str], dict[str, str]]:
    """Splits of `plans` every target that answers has finished, and why each other target did not answer. A
    marker of an earlier plan of the table (removed from the config and added back) does not count."""
    ids = {p.plan_id for p in plans}
    found, unanswered = answering(runtime.lanes, lambda lane: {
        s for s, r in lane.resumer.finished().items() if r.position_data.get("plan_id") in ids})
    return (set.intersection(*found.values()) if found else set()), unanswered


def _snapshot_table(instance, asset, resources, plan: SplitPlan, finished: set[str], per_run: int) -> TableReport:
    todo = [s.id for s in plan.splits if s.id not in finished]
    report = TableReport(str(plan.table), len(plan.splits), 0, 0, 0.0)
    started = time.monotonic()
    # Unfinished splits need not be adjacent: a range must not sweep finished ones in, so cut at gaps.
    for group in _contiguous(todo, [s.id for s in plan.splits]):
        for run_keys in [group[i:i + per_run] for i in range(0, len(group), per_run)]:
            report.runs += 1
            result = dg.materialize([asset], instance=instance, resources=resources, raise_on_error=False, run_config=QUIET,
                                    tags={RANGE_START: run_keys[0], RANGE_END: run_keys[-1]})
            interrupts.check()  # Dagster's handler took the signal and failed the run: no next run
            if not result.success:
                report.failures.append(_failure_text(result, run_keys))
    report.seconds = time.monotonic() - started if todo else 0.0
    return report


def _contiguous(keys: list[str], order: list[str]) -> list[list[str]]:
    position = {k: i for i, k in enumerate(order)}
    groups: list[list[str]] = []
    for key in keys:
        if groups and position[key] == position[groups[-1][-1]] + 1:
            groups[-1].append(key)
        else:
            groups.append([key])
    return groups


def _failure_text(result: dg.ExecuteInProcessResult, keys: list[str]) -> str:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.error is not None:
            error = event.step_failure_data.error
            while error.cause is not None:  # Dagster wraps the error that says what went wrong
                error = error.cause
            failure = event.step_failure_data.user_failure_data
            if failure is not None and failure.description:  # a CdcError: its message says which splits and why
                return failure.description.split(" -- ")[0]
            return f"{keys[0]}..{keys[-1]}: {error.message.strip().splitlines()[0]}"
    return f"{keys[0]}..{keys[-1]}: run failed"


def _stop_spark() -> None:
    from pyspark import SparkContext

    from cdc_assets.spark.session import stop_context

    context = SparkContext._active_spark_context  # the runs left it running on purpose; no public getter
    if context is not None:
        stop_context(context)
