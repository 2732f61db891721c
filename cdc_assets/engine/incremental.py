"""The incremental phase: read the source log from the checkpoint, apply batches of committed transactions to the
target, and checkpoint each batch only after the target acknowledged it.

Without a checkpoint the start comes from `pipeline.startup_mode` (`initial`: the minimum low watermark over
all finished splits). With `from_target`, a batch and its checkpoint commit in one target transaction, so a
crash can neither apply a batch twice nor lose one; with another resumer, a crash between the two replays the
batch, which the upsert makes harmless (at-least-once, exact final state).

A sync is a loop of sessions (one reader connection each): a schema change, a table joining, or a target that
answers again ends one with `Restart`, an unreachable source or target, or a connection lost on the way, with a
retry after a backoff. A session
reads from the earliest lane's checkpoint and hands each item to every lane still applying
(engine/target_lanes.py); a lane (engine/lane.py) skips what its target holds (core/skip_filter.py), batches,
and hands its commits to its target applier (engine/target_applier.py). The log is released up to the earliest
lane still applying.
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Callable

from cdc_assets.core.positions import Position, is_before
from cdc_assets.core.read_limit import ChangePacer
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.engine.interpreter import applying_the_log
from cdc_assets.engine.target_lanes import TargetLanes
from cdc_assets.engine.log_start import check_capture
from cdc_assets.engine.membership import release_bound
from cdc_assets.engine.prefetch import prefetch
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.savepoints import task_lease
from cdc_assets.engine.schema_follower import Restart
from cdc_assets.engine.sync_report import SyncReport, measure_lag, sum_up
from cdc_assets.engine.target_down import connection_lost
from cdc_assets.errors import UnreachableError

__all__ = ["SyncReport", "sync"]
log = logging.getLogger("cdc_assets.incremental")


def sync(rt: TaskRuntime, *, until_caught_up: bool = False, stop: threading.Event | None = None,
         on_batch: Callable[[SyncReport], None] | None = None) -> SyncReport:
    """Apply the log to the target until `stop` is set or, with `until_caught_up`, until the log end seen at the
    start. An unreachable source or target is retried with backoff; a lost position is not. Holds the task's
    lease (no savepoint command runs meanwhile); each lane first finishes an interrupted savepoint rollback of
    its target (engine/lane.py)."""
    with task_lease(rt, doing="sync"), applying_the_log():
        return _sync(rt, until_caught_up, stop, on_batch)


def _sync(rt: TaskRuntime, until_caught_up: bool, stop: threading.Event | None,
          on_batch: Callable[[SyncReport], None] | None) -> SyncReport:
    stop = stop or threading.Event()
    pipeline = rt.config.pipeline
    report = SyncReport()
    started = time.monotonic()
    until: Position | None = None
    failures = 0
    checked = False  # the source's capture settings, at the start and after each reconnect (a restart may change them)
    while not stop.is_set():
        progress = report.events + report.batches
        try:
            if not checked:
                check_capture(rt)
                checked = True
            if until_caught_up and until is None:
                until = rt.source.current_position()
            _Session(rt, report, stop, on_batch).run(until)
            report.ended = "stop requested" if stop.is_set() and not until_caught_up else "caught up"
            break
        except Restart:
            continue
        except Exception as exc:
            # A server that ended our session (restarted, failed over) is one that did not answer: retried alike.
            unreachable = exc if isinstance(exc, UnreachableError) else connection_lost(exc)
            if unreachable is None:
                raise
            failures = 1 if report.events + report.batches > progress else failures + 1
            if failures > pipeline.max_retries:
                if unreachable is exc:
                    raise
                raise unreachable from exc
            wait = pipeline.retry_backoff_secs * 2 ** (failures - 1)
            log.warning("%s; reconnecting in %.1f s (attempt %d of %d)", unreachable, wait, failures,
                        pipeline.max_retries)
            report.retries += 1
            checked = False
            rt.reconnect()
            stop.wait(wait)
    else:
        report.ended = "stop requested"
    report.seconds = time.monotonic() - started
    end = functools.cache(lambda: rt.source.current_position())  # read once, for the task and its targets
    for target in report.targets.values():
        measure_lag(rt, target, end)
    sum_up(rt, report)
    measure_lag(rt, report, end)
    return report


class _Session:
    """One connection's worth of reading, from the earliest lane's checkpoint to the end (or to a restart), each
    item handed to every lane still applying."""

    def __init__(self, rt: TaskRuntime, report: SyncReport, stop: threading.Event,
                 on_batch: Callable[[SyncReport], None] | None) -> None:
        self.rt, self.report, self.stop = rt, report, stop
        self.lanes = TargetLanes(rt, report, stop, on_batch, self.acknowledge)
        self.start = self.lanes.start
        self.schemas: dict[TableId, TableSchema] = {}
        # The earliest lane's schemas read the log from its start; of lanes at the start, the oldest schema version:
        # a lane that followed a schema change checkpoints at the change, where a lane killed before it followed
        # still is, and the log read with the old definitions brings the change to the lane that has not met it
        # (a lane that has skips it).
        for lane in sorted(self.lanes, key=lambda lane: (lane.position != self.start, lane.checkpoint.version)):
            lane.behind(self.start)
            for table, schema in lane.schemas.items():
                self.schemas.setdefault(table, schema)
        if self.lanes.several and not report.start:
            report.start = str(self.start)
            report.start_reason = "the earliest checkpoint of " + ", ".join(
                f"{lane.rt.name} ({lane.report.start_reason})" for lane in self.lanes)
        limit = rt.config.pipeline.read_limit  # paced after each checkpoint, since this sync started
        self.lanes.pace(ChangePacer(limit.rows_per_second, limit.bytes_per_second, stop.wait))
        # Values the sinks would only print again stay the source's text: one sink needing Python values decides.
        self.reader = rt.log.reader(self.schemas, source_text=bool(self.lanes) and all(
            lane.rt.sink.parses_source_text() for lane in self.lanes))

    def acknowledge(self) -> None:
        """The log may be released up to the earliest lane still applying."""
        if self.lanes:
            self.reader.acknowledge(release_bound(self.rt, self.schemas, self.lanes.start))

    def run(self, until: Position | None) -> None:
        if until is not None and not is_before(self.start, until):
            for lane in self.lanes:
                lane.record_start()  # nothing to read; the start is still worth recording
            return
        parts_of = self.rt.config.pipeline.transaction_part_events
        items = prefetch(self.reader.read(self.start, stop_at=until, part_events=parts_of), self.reader.close)
        try:
            for item in items:
                self.lanes.step(item, _once(items.drained))  # one answer per item: the lanes end batches together
                # A transaction in parts is finished first: stopping would throw its parts away, and runs
                # bounded in time could then never get past it.
                if self.stop.is_set() and self.lanes.settled:
                    break
                self.lanes.rejoin()
            self.lanes.finish()
        finally:
            items.close()
            for lane in self.lanes:
                lane.abandon()


def _once(ask: Callable[[float], bool]) -> Callable[[float], bool]:
    answer: list[bool] = []

    def asked(wait: float) -> bool:
        if not answer:
            answer.append(ask(wait))
        return answer[0]
    return asked
