"""What a sync did, per run, per table and per target: shown by the CLI and as Dagster metadata."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from cdc_assets.core.positions import Position
from cdc_assets.core.slow_batch import SlowBatch
from cdc_assets.core.transaction_parts import Tally
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import UnreachableError


@dataclass
class SyncReport:
    """What a sync did, per run and per table; shown by the CLI and as Dagster metadata."""

    start: str = ""
    start_reason: str = ""
    checkpoint: Position | None = None
    events: int = 0  # row changes read and applied (before compaction)
    skipped: int = 0  # changes the target held already: in the snapshot (exactly-once), or applied by a table ahead
    transactions: int = 0
    batches: int = 0
    rows_written: int = 0  # after compaction by key
    per_table: dict[str, int] = field(default_factory=dict)
    lag_seconds: float | None = None  # source commit time of the last applied change to now; 0 when caught up
    lag_bytes: int | None = None  # log distance from the checkpoint to the source's log end, at the end
    lag_unit: str = "bytes"  # the source log's distance unit (a MongoDB source counts seconds of cluster time)
    retries: int = 0
    seconds: float = 0.0
    schema_version: int = 0
    ended: str = ""
    joined: list[str] = field(default_factory=list)  # tables that joined the log phase in this run
    removed: list[str] = field(default_factory=list)  # tables no longer applied (removed from source.tables)
    waiting: list[str] = field(default_factory=list)  # added tables whose snapshot is not finished
    slow_batches: int = 0  # batches whose target apply exceeded pipeline.checkpoint_timeout_secs
    slowest: SlowBatch | None = None
    targets: dict[str, "SyncReport"] = field(default_factory=dict)  # with several targets: each one's own
    target_states: dict[str, str] = field(default_factory=dict)  # a target that did not apply: why (down, lost...)

    def lines(self) -> list[str]:
        tables = ", ".join(f"{t}: {n}" for t, n in sorted(self.per_table.items())) or "none"
        return [
            f"started at {self.start} ({self.start_reason})",
            f"applied {self.events} changes in {self.transactions} transactions, {self.batches} batches "
            f"({self.rows_written} rows written after compaction, {self.skipped} skipped as already in the target)",
            f"per table: {tables}",
            *([f"joined the log phase: {', '.join(self.joined)}"] if self.joined else []),
            *([f"no longer applied (removed from source.tables): {', '.join(self.removed)}"] if self.removed else []),
            *([f"waiting for their snapshot: {'; '.join(self.waiting)}"] if self.waiting else []),
            *([f"{self.slow_batches} batches over checkpoint_timeout_secs; slowest: {self.slowest.advice()}"]
              if self.slowest else []),
            f"checkpoint: {self.checkpoint}; lag {_fmt(self.lag_seconds, 's')}, {_fmt(self.lag_bytes, ' ' + self.lag_unit)} of log",
            *[f"target {name}: {t.events} changes in {t.batches} batches, checkpoint {t.checkpoint}, lag "
              f"{_fmt(t.lag_bytes, ' ' + t.lag_unit)} of log" + (f"; {self.target_states[name]}"
                                                                   if name in self.target_states else "")
              for name, t in self.targets.items()],
            f"{self.ended} after {self.seconds:.1f} s" + (f", {self.retries} reconnects" if self.retries else ""),
        ]

    def count(self, tally: Tally) -> None:
        """A batch committed, its checkpoint recorded."""
        self.batches += 1
        self.transactions += tally.transactions
        self.events += tally.events
        self.rows_written += tally.rows
        for table, n in tally.per_table.items():
            self.per_table[table] = self.per_table.get(table, 0) + n
        if tally.commit_time is not None:
            self.lag_seconds = max(0.0, time.time() - tally.commit_time)


def sum_up(rt: TaskRuntime, report: SyncReport) -> None:
    """With several targets: the task's figures are the furthest target's, its checkpoint the policy's."""
    if not report.targets:
        return
    furthest = max(report.targets.values(), key=lambda t: t.events)
    for name in ("events", "skipped", "transactions", "batches", "rows_written", "per_table", "schema_version",
                 "joined", "removed", "waiting"):
        setattr(report, name, getattr(furthest, name))
    report.slow_batches = sum(t.slow_batches for t in report.targets.values())
    slowest = [t.slowest for t in report.targets.values() if t.slowest is not None]
    report.slowest = max(slowest, key=lambda b: b.target_secs) if slowest else None
    lags = [t.lag_seconds for n, t in report.targets.items() if n not in report.target_states and t.lag_seconds is not None]
    report.lag_seconds = max(lags) if lags else None
    report.checkpoint = rt.policy.checkpoint({n: t.checkpoint for n, t in report.targets.items()})


def measure_lag(rt: TaskRuntime, report: SyncReport, end: Callable[[], Position]) -> None:
    if report.checkpoint is None:
        return
    try:
        report.lag_unit = rt.log.distance_unit
        report.lag_bytes = rt.log.distance(report.checkpoint, end())
    except UnreachableError:
        report.lag_bytes = None
    if report.lag_bytes == 0:
        report.lag_seconds = 0.0


def _fmt(value, unit: str) -> str:
    if value is None:
        return "unknown"
    return f"{value:.2f}{unit}" if isinstance(value, float) else f"{value}{unit}"
