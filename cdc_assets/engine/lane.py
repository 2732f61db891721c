"""One target's lane of the log phase: it takes each item of the log in order and hands it to the part that owns it.

    item --> SkipFilter.applied_before (at or before this lane's checkpoint: dropped)
         --> Transaction        --> SkipFilter.keep --> the batch --> (full) TargetApplier.prepare / commit
         --> TransactionPart    --> TransactionInParts.take --> TargetApplier.apply_part (or held whole)
             ... its end        --> TransactionInParts.end --> TargetApplier.commit (or the whole as a batch)
         --> Idle               --> the quiet point the checkpoint may move to
         --> SchemaChange       --> SchemaFollower.follow --> checkpoint, Restart (or go on)

A batch ends at a transaction end: when full, or when the reader has nothing more to hand out within
`pipeline.max_batch_delay_ms` of the previous batch's end. A followed log is thus committed as it comes, one batch
per what arrived during the last apply, while a backlog keeps the read-ahead queue filled and its batches grow to
`checkpoint_after_events`. The wait bounds the commits of a stream of tiny transactions to one per delay, and
keeps a backlog batching while the reader is a moment behind.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from cdc_assets.core.batches import Batch
from cdc_assets.core.events import Idle, SchemaChange, Transaction, TransactionPart
from cdc_assets.core.positions import Position, is_before
from cdc_assets.core.skip_filter import SkipFilter
from cdc_assets.core.transaction_parts import Tally, TransactionInParts
from cdc_assets.engine.faults import crash_point
from cdc_assets.engine.log_start import split_watermarks
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.schema_follower import Restart, SchemaFollower
from cdc_assets.engine.target_applier import Prepared, TargetApplier
from cdc_assets.engine.target_savepoints import recover

log = logging.getLogger("cdc_assets.incremental")


class Lane:
    """One target's side of a session: its batch, its transaction in parts, and the parts that own the rest."""

    def __init__(self, rt: TaskRuntime, report, stop: threading.Event,
                 on_batch: Callable[[object], None] | None, acknowledge: Callable[[], None]) -> None:
        self.rt, self.report, self.stop = rt, report, stop
        self.pipeline = rt.config.pipeline
        recover(rt)  # a rollback of this target killed midway is finished before its checkpoint is read
        self.follower = SchemaFollower(rt)
        self.checkpoint, ahead = self.follower.start(report)
        self.skip = SkipFilter(ahead, split_watermarks(rt) if self.pipeline.exactly_once else {})
        self.applier = TargetApplier(rt, self.checkpoint, report, acknowledge, on_batch)
        self.batch, self.opened, self.idle_at = Batch(), time.monotonic(), None
        self._parts: TransactionInParts | None = None

    position = property(lambda self: self.checkpoint.position)
    schemas = property(lambda self: self.checkpoint.schemas)

    @property
    def settled(self) -> bool:
        """No transaction in parts is open: stopping now throws nothing half-applied away."""
        return self._parts is None

    def behind(self, start: Position) -> None:
        """The session reads from `start`, maybe before this lane's checkpoint: skip what it holds already."""
        self.skip.behind(start, self.position, self.schemas)

    def step(self, item, drained: Callable[[float], bool]) -> None:
        """Take one item of the log; `drained(wait)`: has the reader nothing more to hand out within `wait` s?"""
        self.applier.settle_ended()
        if self._parts is None and self.skip.applied_before(item):
            return
        if isinstance(item, TransactionPart):
            self._part(item)
        elif isinstance(item, Transaction):
            if self._parts is not None:
                self._end_parts(item)
                self.opened = time.monotonic()
            else:
                self.batch.add(self._keep(item))
        elif isinstance(item, Idle) and self._parts is None:
            self.idle_at = item.position
            if not self.batch:
                self.report.lag_seconds = 0.0
        elif isinstance(item, SchemaChange):
            if self.skip.followed(item):
                log.info("DDL on %s at %s: before where the table joined from its own snapshot, which holds it; "
                         "left out: %s", item.table, item.position, item.statement)
            else:
                self._flush()
                self._schema_change(item)
        self._end_batch(item, drained)
        if not self.batch and self._parts is None and not self.stop.is_set():
            self.follower.check_members(self.checkpoint)

    def finish(self) -> None:
        """The log ended (or a stop): apply what is batched, and move the checkpoint to the last quiet point."""
        self._flush()
        if self.idle_at is not None:
            self._advance(self.idle_at)
        self.applier.settle()

    def record_start(self) -> None:
        """Nothing to read: a start whose schemas are not recorded yet is still worth checkpointing."""
        if self.checkpoint.pending:
            self._commit(self.position)

    def abandon(self) -> None:
        """The session ends here: a transaction in parts still open counts for nothing."""
        self.applier.abandon()
        self._parts = None

    def _end_batch(self, item, drained: Callable[[float], bool]) -> None:
        pipeline, batch = self.pipeline, self.batch
        interval = pipeline.checkpoint_interval_secs
        full = batch.events >= pipeline.checkpoint_after_events or (batch and (
            time.monotonic() - self.opened >= interval or (isinstance(item, Idle) and item.flush)
            or drained(self._delay_left())))
        if full or (self.stop.is_set() and batch):
            self._flush()
            self.opened = time.monotonic()
        elif not batch and self.idle_at is not None and time.monotonic() - self.opened >= interval:
            self._advance(self.idle_at)  # quiet: move the checkpoint so lag reads 0 and the log can be released
            self.opened = time.monotonic()

    def _delay_left(self) -> float:
        """Seconds the batch may still wait for the reader: up to max_batch_delay_ms after the previous batch."""
        return max(0.0, self.opened + self.pipeline.max_batch_delay_ms / 1000 - time.monotonic())

    def _keep(self, tx: Transaction) -> Transaction:
        kept, skipped = self.skip.keep(tx, self.schemas)
        self.report.skipped += skipped
        return kept

    def _part(self, part: TransactionPart) -> None:
        if self._parts is None:
            self._flush()  # a transaction in parts has a target transaction of its own
            self.applier.settle()
            holding = self.skip.may_skip(part.floor)
            if holding:
                log.warning("a transaction of more than %d changes committed while the snapshot ran or before a "
                            "table's own position (before %s): held whole until its commit, which filtering needs",
                            self.pipeline.transaction_part_events, part.floor)
            else:
                self.applier.open()
            self._parts = TransactionInParts(holding)
        changes = self._parts.take(part)
        if changes is not None:
            self.applier.apply_part(self.applier.prepare(changes, part.floor, self._parts.moves), self._parts.tally)

    def _end_parts(self, tx: Transaction) -> None:
        parts = self._parts
        rest = parts.end(tx)
        if parts.holding:
            self._parts = None
            if self.skip.applied_before(tx):  # held whole by a lane ahead of the session: committed there already
                return
            self.batch.add(self._keep(rest))
            self._flush()
            return
        prepared = self.applier.prepare(self._keep(rest).changes, parts=parts.moves)
        self._parts = None
        self._commit(tx.end, prepared, parts.tally)

    def _flush(self) -> None:
        batch, self.batch = self.batch, Batch()
        if not batch:
            return
        changes = [c for tx in batch.transactions for c in tx.changes]
        tally = Tally(transactions=len(batch.transactions), commit_time=batch.commit_time)
        self._commit(batch.end, self.applier.prepare(changes), tally)

    def _commit(self, position: Position, prepared: Prepared | None = None, tally: Tally | None = None) -> None:
        self.skip.passed(position)
        self.applier.commit(position, self.skip.ahead, prepared, tally)

    def _advance(self, position: Position) -> None:
        self.applier.settle()  # `position` must be ahead of what is in flight
        # Not while a transaction in parts is open: its own checkpoint comes with its commit, later.
        if self._parts is None and is_before(self.position, position):
            self._commit(position)

    def _schema_change(self, change: SchemaChange) -> None:
        self.applier.settle()
        if not self.follower.follow(change, self.checkpoint):
            return self._advance(change.position)
        self.abandon()  # the restart reads its transaction again, with the new definitions
        self._commit(change.position)
        crash_point("incremental.schema_followed")
        raise Restart()
