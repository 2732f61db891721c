"""One target's commits in the log phase: a batch (or a part of a transaction in parts) is prepared on the lane's
thread, applied by the sink on a thread of its own, and committed with its checkpoint.

    prepare (lane thread: compaction, value fit, the sink's rendering)
      -> hand over: apply, checkpoint records, commit (its own thread; one in flight)
      -> settle (lane thread: the checkpoint recorded, the report told, the log released)

The target's work on one batch overlaps the lane's Python on the next; the next one's target work starts only
after the one before it committed and its checkpoint was recorded (`settle`), so commits stay one at a time and
in log order, on the target's one commit connection. With `from_target` the checkpoint commits inside the
target transaction; with another resumer it is written right after the commit (a crash between the two replays
the batch, which the upsert makes harmless).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from cdc_assets.core.batches import MovesAcrossParts, TableChanges, compact
from cdc_assets.core.events import RowChange
from cdc_assets.core.positions import Position
from cdc_assets.core.read_limit import ChangePacer
from cdc_assets.core.slow_batch import slow
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.transaction_parts import Tally
from cdc_assets.core.watermarks import batch_start, replaying_until
from cdc_assets.engine.faults import crash_point
from cdc_assets.engine.lane_checkpoint import LaneCheckpoint
from cdc_assets.engine.log_start import snapshot_horizons
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.image_writer import ImageWriter
from cdc_assets.engine.target_down import one_line
from cdc_assets.engine.target_transaction import TargetTransaction
from cdc_assets.engine.value_fit import check_fit

log = logging.getLogger("cdc_assets.incremental")


@dataclass(frozen=True)
class Prepared:
    """Changes made ready without the target: compacted by key, checked to fit, rendered by the sink."""

    events: int  # row changes before compaction
    net: dict[TableId, TableChanges]
    schemas: dict[TableId, TableSchema]


class TargetApplier:
    """A lane's target side: its checkpoint, the one commit in flight, the target transaction of a transaction in
    parts, and what each commit adds to the report (`on_batch(report)` after each batch, on the lane's thread,
    once its checkpoint is recorded), the batches whose target time outlasted `pipeline.checkpoint_timeout_secs`
    among it."""

    def __init__(self, rt: TaskRuntime, checkpoint: LaneCheckpoint, report, acknowledge: Callable[[], None],
                 on_batch: Callable | None) -> None:
        self.rt, self.checkpoint, self.report = rt, checkpoint, report
        self.acknowledge = acknowledge  # the checkpoint moved: the log may be released further
        self.on_batch = on_batch
        self.pacer: ChangePacer | None = None  # pipeline.read_limit: one lane paces a session (engine/target_lanes.py)
        self.pipeline = rt.config.pipeline
        self.horizons = snapshot_horizons(rt)
        self.images = ImageWriter(rt)  # before-images while a savepoint exists
        self._open: TargetTransaction | None = None  # a transaction in parts' target transaction
        self._in_flight: _InFlight | None = None

    def prepare(self, changes: list[RowChange], floor: Position | None = None,
                parts: MovesAcrossParts | None = None) -> Prepared:
        """What needs no target. `floor`: a transaction part's, for changes not positioned yet; `parts`: of a
        transaction in parts, what its parts share."""
        schemas, sink = self.checkpoint.schemas, self.rt.sink
        net = compact(changes, schemas)
        first, last = batch_start(changes, floor), changes[-1].position if changes else None
        for table, table_changes in net.items():
            table_changes.replaying_until = replaying_until(self.horizons, table, first)
            table_changes.floor, table_changes.parts, table_changes.last = floor, parts, last
            check_fit(sink, schemas[table], table_changes, changes, floor or self.checkpoint.position)
            sink.prepare_changes(schemas[table], table_changes)
        if self.pacer is not None:
            self.pacer.count(changes)
        return Prepared(len(changes), net, schemas)

    def open(self) -> None:
        """A transaction in parts begins: its parts go into one target transaction, committed by `commit`."""
        self.settle()  # the batch before it commits on the same connection first
        self._open = TargetTransaction(self.rt.sink)

    def apply_part(self, prepared: Prepared, tally: Tally) -> None:
        target = self._open

        def work() -> None:
            self._apply(target.cursor, prepared, tally)
            crash_point("incremental.part_applied")

        def applied(seconds: float) -> None:
            tally.seconds += seconds

        self._hand_over(work, applied)

    def commit(self, position: Position, ahead: Mapping[TableId, Position], prepared: Prepared | None = None,
               tally: Tally | None = None) -> None:
        """Apply `prepared` (in the open target transaction, else a new one) and checkpoint at `position`. With a
        `tally` the target's work is handed over and this returns at once; without (a checkpoint alone) it is
        done before this returns."""
        self.settle()
        resumer, checkpoint = self.rt.resumer, self.checkpoint
        events = (tally.events if tally else 0) + (prepared.events if prepared else 0)
        records = checkpoint.records(resumer, position, events, ahead)
        target, self._open = self._open or TargetTransaction(self.rt.sink), None

        def work() -> None:
            try:
                if prepared is not None:
                    self._apply(target.cursor, prepared, tally)
                crash_point("incremental.after_apply")
                if resumer.writes_in_target:
                    resumer.write_in(target.cursor, records)
            except BaseException:
                target.rollback()
                raise
            target.commit()
            crash_point("incremental.after_commit")

        def committed(seconds: float) -> None:
            resumer.record_committed(records)
            checkpoint.committed(position)
            self.report.checkpoint, self.report.schema_version = position, checkpoint.version
            self.acknowledge()
            if tally is not None:
                tally.seconds += seconds
                self._timed(tally)
                self.report.count(tally)
                if self.on_batch is not None:
                    self.on_batch(self.report)
                if self.pacer is not None:
                    self.pacer.pace()  # pipeline.read_limit: a transaction in parts is paced once, after its commit

        if tally is None:
            began = time.monotonic()
            work()
            committed(time.monotonic() - began)
        else:
            self._hand_over(work, committed)

    def settle(self) -> None:
        """Wait for the target's work in flight (raising its error); once it committed, what follows its commit."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None:
            in_flight.wait()
            in_flight.done(in_flight.seconds)

    def settle_ended(self) -> None:
        """Settle the work in flight if it ended: its checkpoint is recorded as soon as it committed, not when the
        next batch is ready."""
        if self._in_flight is not None and self._in_flight.ended:
            self.settle()

    def abandon(self) -> None:
        """The stream ended inside a transaction in parts: none of it counts. The work in flight is waited for
        first; its error, if any, is not the one to report (the one ending the session is)."""
        try:
            self.settle()
        except Exception as exc:
            log.warning("the target's work in flight failed as the session ended: %s", one_line(exc))
        if self._open is not None:
            self._open.rollback()
        self._open = None

    def _hand_over(self, work: Callable[[], None], done: Callable[[float], None]) -> None:
        """The target's work goes to a thread of its own once the work before it settled, so that the lane's
        thread prepares the next one meanwhile."""
        self.settle()
        self._in_flight = _InFlight(work, done)

    def _apply(self, cursor, prepared: Prepared, tally: Tally) -> None:
        self.images.capture(cursor, prepared.schemas, prepared.net)  # before anything of the batch is written
        for table, table_changes in prepared.net.items():
            self.rt.sink.apply_changes(cursor, prepared.schemas[table], table_changes)
        tally.add(prepared.events, prepared.net)

    def _timed(self, tally: Tally) -> None:
        """Report a batch whose target time outlasted pipeline.checkpoint_timeout_secs, with what to tune."""
        found = slow(str(self.checkpoint.position), tally.events, tally.rows, tally.transactions, tally.seconds,
                     self.pipeline.checkpoint_timeout_secs, self.pipeline.checkpoint_after_events)
        if found is None:
            return
        log.warning(found.advice())
        self.report.slow_batches += 1
        if self.report.slowest is None or found.target_secs > self.report.slowest.target_secs:
            self.report.slowest = found


class _InFlight:
    """The target's work running on a thread of its own; `done(seconds it took)` is what follows it, on the
    lane's thread."""

    def __init__(self, work: Callable[[], None], done: Callable[[float], None]) -> None:
        self.done, self._error, self.seconds = done, None, 0.0
        self._thread = threading.Thread(target=self._run, args=(work,), name="cdc-apply", daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[], None]) -> None:
        began = time.monotonic()
        try:
            work()
        except BaseException as exc:  # raised on the lane's thread by wait()
            self._error = exc
        self.seconds = time.monotonic() - began

    @property
    def ended(self) -> bool:
        return not self._thread.is_alive()

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error
