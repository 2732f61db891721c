"""The incremental phase: read the source log from the checkpoint, apply batches of committed transactions to the
target, and checkpoint each batch only after the target acknowledged it.

Without a checkpoint the start comes from `pipeline.startup_mode` (`initial`: the minimum low watermark over
all finished splits). With `from_target`, a batch and its checkpoint commit in one target transaction, so a
crash can neither apply a batch twice nor lose one; with another resumer, a crash between the two replays the
batch, which the upsert makes harmless (at-least-once, exact final state).

A transaction larger than `transaction_part_events` arrives in parts (TransactionPart) and is applied part by
part, in log order, inside one target transaction that its final part commits together with its checkpoint:
memory holds one part, never the transaction, and a crash in between rolls all of it back and the log is
re-read from the checkpoint. Applying each part's compaction in order equals applying its changes in order.

The target's work on a batch (or part) runs on a thread of its own while the lane prepares the next one (compaction,
the sink's rendering): the Python of the one overlaps the target's time on the other. The next one's target work
starts only after the one before it committed and its checkpoint was recorded (`_Lane._settle`), so commits stay
one at a time and in log order.

Several targets share one reader: each (a `_Lane`) applies the log from its own checkpoint in its own target
transactions, skipping what it holds already, so a target that was down catches up without replaying what the
others applied. The log is read from the earliest lane and released up to the earliest lane still applying;
`pipeline.commit_policy` decides which lanes may fail without failing the run, and what the task's checkpoint is.
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from cdc_assets.core.batches import Batch, TableChanges, compact, split_key_change
from cdc_assets.core.events import Idle, RowChange, SchemaChange, Transaction, TransactionPart
from cdc_assets.core.positions import Position, earliest, is_before
from cdc_assets.core.read_limit import ChangePacer
from cdc_assets.core.slow_batch import SlowBatch, slow
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.engine.interpreter import applying_the_log
from cdc_assets.engine.faults import crash_point
from cdc_assets.engine.log_start import check_capture, resolve_start, snapshot_horizons, split_watermarks
from cdc_assets.engine.membership import membership, release_bound
from cdc_assets.engine.planning import describe
from cdc_assets.engine.prefetch import prefetch
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.savepoints import ImageWriter, recover, task_lease
from cdc_assets.engine.schema_changes import settle
from cdc_assets.engine.value_fit import check_fit
from cdc_assets.engine.target_down import one_line, target_down
from cdc_assets.engine.target_transaction import Parts, Tally, TargetTransaction
from cdc_assets.errors import CdcError, PlanError, PositionLost, PositionsIncomparable, UnreachableError
from cdc_assets.resumer.resumer import Checkpoint

log = logging.getLogger("cdc_assets.incremental")
MEMBERSHIP_CHECK_SECS = 10.0  # how often a running session looks for added tables whose snapshot finished


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


class _Restart(Exception):
    """Reopen the log with new schemas (after an applied ADD COLUMN)."""


def sync(rt: TaskRuntime, *, until_caught_up: bool = False, stop: threading.Event | None = None,
         on_batch: Callable[[SyncReport], None] | None = None) -> SyncReport:
    """Apply the log to the target until `stop` is set or, with `until_caught_up`, until the log end seen at the
    start. An unreachable source or target is retried with backoff; a lost position is not. Holds the task's
    lease (no savepoint command runs meanwhile) and first finishes an interrupted savepoint rollback."""
    with task_lease(rt, doing="sync"), applying_the_log():
        recover(rt)
        check_capture(rt)
        return _sync(rt, until_caught_up, stop, on_batch)


def _sync(rt: TaskRuntime, until_caught_up: bool, stop: threading.Event | None,
          on_batch: Callable[[SyncReport], None] | None) -> SyncReport:
    stop = stop or threading.Event()
    pipeline = rt.config.pipeline
    report = SyncReport()
    started = time.monotonic()
    until: Position | None = None
    failures = 0
    while not stop.is_set():
        progress = report.events + report.batches
        try:
            if until_caught_up and until is None:
                until = rt.source.current_position()
            _Session(rt, report, stop, on_batch).run(until)
            report.ended = "stop requested" if stop.is_set() and not until_caught_up else "caught up"
            break
        except _Restart:
            continue
        except UnreachableError as exc:
            failures = 1 if report.events + report.batches > progress else failures + 1
            if failures > pipeline.max_retries:
                raise
            wait = pipeline.retry_backoff_secs * 2 ** (failures - 1)
            log.warning("%s; reconnecting in %.1f s (attempt %d of %d)", exc, wait, failures, pipeline.max_retries)
            report.retries += 1
            rt.reconnect()
            stop.wait(wait)
    else:
        report.ended = "stop requested"
    report.seconds = time.monotonic() - started
    end = functools.cache(lambda: rt.source.current_position())  # read once, for the task and its targets
    for target in report.targets.values():
        _measure_lag(rt, target, end)
    _sum_up(rt, report)
    _measure_lag(rt, report, end)
    return report


def _sum_up(rt: TaskRuntime, report: SyncReport) -> None:
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


class _Session:
    """One connection's worth of reading, from the earliest lane's checkpoint to the end (or to a restart), each
    item handed to every lane still applying."""

    def __init__(self, rt: TaskRuntime, report: SyncReport, stop: threading.Event,
                 on_batch: Callable[[SyncReport], None] | None) -> None:
        self.rt, self.report, self.stop = rt, report, stop
        self.policy = rt.policy
        self.several = len(rt.lanes) > 1
        self.lanes: list[_Lane] = []
        self.checked = time.monotonic()
        for lane_rt in rt.lanes:
            own = report.targets.setdefault(lane_rt.name, SyncReport()) if self.several else report
            try:
                if self.several:
                    lane_rt.sink  # a target that is down is found here, not in its first batch
                self.lanes.append(_Lane(lane_rt, own, stop, on_batch, self.acknowledge))
            except Exception as exc:
                self._drop_at_start(lane_rt, exc)
                continue
            report.target_states.pop(lane_rt.name, None)
        self._policy_met()
        self._drop_lost()
        self.start = earliest([lane.position for lane in self.lanes])
        self.schemas: dict[TableId, TableSchema] = {}
        for lane in sorted(self.lanes, key=lambda lane: 0 if lane.position == self.start else 1):
            lane.behind(self.start)
            for table, schema in lane.schemas.items():
                self.schemas.setdefault(table, schema)  # the earliest lane's schema reads the log from its start
        if self.several and not report.start:
            report.start = str(self.start)
            report.start_reason = "the earliest checkpoint of " + ", ".join(
                f"{lane.rt.name} ({lane.report.start_reason})" for lane in self.lanes)
        limit = rt.config.pipeline.read_limit  # paced after each checkpoint, since this sync started
        self.pacer = ChangePacer(limit.rows_per_second, limit.bytes_per_second, stop.wait)
        self._hand_pacer()
        # Values the sinks would only print again stay the source's text: one sink needing Python values decides.
        self.reader = rt.log.reader(self.schemas, source_text=bool(self.lanes) and all(
            lane.rt.sink.parses_source_text() for lane in self.lanes))

    def _hand_pacer(self) -> None:
        """The lanes apply the same log in step: the first one still applying paces them all."""
        for i, lane in enumerate(self.lanes):
            lane.pacer = self.pacer if i == 0 else None

    def _drop_at_start(self, lane_rt: TaskRuntime, exc: Exception) -> None:
        """A target that cannot start applying: down, or waiting for its snapshot. Fatal unless the policy
        tolerates it."""
        waiting = isinstance(exc, PlanError)
        if not self.several or not (waiting or target_down(exc)) or not self.policy.tolerates(lane_rt.name):
            if self.several and isinstance(exc, CdcError):
                try:
                    named = type(exc)(f"target {lane_rt.name}: {exc.message}", exc.hint)
                except TypeError:
                    raise exc from None
                raise named from None
            raise exc
        self._record_out(lane_rt, ("waiting: " if waiting else "down: ") + one_line(exc))

    def _record_out(self, lane_rt: TaskRuntime, state: str) -> None:
        log.warning("target %s is not applying the log in this run (commit_policy %s goes on without it): %s",
                    lane_rt.name, self.policy.text, state)
        self.report.target_states[lane_rt.name] = state
        lane_rt.reconnect()

    def _policy_met(self) -> None:
        applying = {lane.rt.name for lane in self.lanes}
        if not self.policy.met(applying):
            states = "; ".join(f"{n}: {s}" for n, s in self.report.target_states.items())
            raise UnreachableError(f"commit_policy {self.policy.text} cannot be met: {self.policy.missing(applying)} "
                                   f"({states})", "bring the targets named back; the run retries them")

    def _drop_lost(self) -> None:
        """A lane whose checkpoint is before the oldest position the source still keeps cannot catch up from the
        log: fatal for a target the policy needs, dropped (and said) for one it tolerates."""
        positions = [lane.position for lane in self.lanes]
        if len(self.lanes) < 2 or all(p == positions[0] for p in positions):
            return
        oldest = self.rt.log.earliest()
        for lane in list(self.lanes):
            if not is_before(lane.position, oldest):
                continue
            message = (f"target {lane.rt.name}'s checkpoint {lane.position} is before the oldest position the "
                       f"source keeps ({oldest}): its changes since are gone from the log")
            hint = (f"snapshot target {lane.rt.name} again: with the incremental launcher stopped, remove it from "
                    "targets, empty its tables, and add it back under a new name; it is snapshotted and joins the "
                    "log phase from its own low watermarks")
            if not self.policy.tolerates(lane.rt.name):
                raise PositionLost(message, hint)
            self.lanes.remove(lane)
            self._record_out(lane.rt, f"lost: {message}; {hint}")
            self._policy_met()

    def acknowledge(self) -> None:
        """The log may be released up to the earliest lane still applying."""
        if self.lanes:
            self.reader.acknowledge(release_bound(self.rt, self.schemas, earliest([lane.position for lane in self.lanes])))

    def run(self, until: Position | None) -> None:
        if until is not None and not is_before(self.start, until):
            for lane in self.lanes:
                if lane._pending_schema:
                    lane._checkpoint(0, lane.position)  # nothing to read; the start is still worth recording
            return
        parts_of = self.rt.config.pipeline.transaction_part_events
        items = prefetch(self.reader.read(self.start, stop_at=until, part_events=parts_of), self.reader.close)
        try:
            for item in items:
                drained = _once(items.drained)  # one answer per item: the lanes end their batches together
                for lane in list(self.lanes):
                    self._guarded(lane, lane.step, item, drained)
                # A transaction in parts is finished first: stopping would throw its parts away, and runs
                # bounded in time could then never get past it.
                if self.stop.is_set() and all(lane.settled for lane in self.lanes):
                    break
                self._rejoin()
            for lane in list(self.lanes):
                self._guarded(lane, lane.finish)
        finally:
            items.close()
            for lane in self.lanes:
                lane._abandon_parts()

    def _guarded(self, lane: "_Lane", step: Callable, *args) -> None:
        """Run a lane's step; a target the policy tolerates that fails leaves the session, the others go on."""
        try:
            step(*args)
        except Exception as exc:
            if not self.several or not target_down(exc) or not self.policy.tolerates(lane.rt.name):
                raise
            lane._abandon_parts()
            self.lanes.remove(lane)
            self._record_out(lane.rt, f"down since {lane.position}: {one_line(exc)}")
            self._hand_pacer()
            self._policy_met()

    def _rejoin(self) -> None:
        """Every MEMBERSHIP_CHECK_SECS: a target that was down and answers again rejoins (the session restarts
        from its checkpoint, the others skipping what they hold)."""
        if not self.several or time.monotonic() - self.checked < MEMBERSHIP_CHECK_SECS:
            return
        self.checked = time.monotonic()
        if any(lane.batch or not lane.settled for lane in self.lanes):
            return
        for lane_rt in self.rt.lanes:
            if self.report.target_states.get(lane_rt.name, "").startswith("down"):
                try:
                    lane_rt.sink
                except Exception:
                    lane_rt.reconnect()
                    continue
                log.info("target %s answers again: it catches up from its own checkpoint", lane_rt.name)
                raise _Restart()


def _once(ask: Callable[[float], bool]) -> Callable[[float], bool]:
    answer: list[bool] = []

    def asked(wait: float) -> bool:
        if not answer:
            answer.append(ask(wait))
        return answer[0]
    return asked


class _Lane:
    """One target's side of a session: its checkpoint, its filters, its batch and its target transactions."""

    def __init__(self, rt: TaskRuntime, report: SyncReport, stop: threading.Event,
                 on_batch: Callable[[SyncReport], None] | None, acknowledge: Callable[[], None]) -> None:
        self.rt, self.report, self.stop, self.on_batch = rt, report, stop, on_batch
        self.acknowledge = acknowledge  # tells the session this lane's checkpoint moved
        self.floor: Position | None = None  # the lane's checkpoint, while the session reads from before it
        self.pipeline = rt.config.pipeline
        self._pending_schema: list = []  # schema records to write with the next checkpoint
        self.ahead: dict[TableId, Position] = {}  # tables that applied the log further than `position`
        resumer = rt.resumer
        checkpoint = resumer.checkpoint()
        if checkpoint is not None:
            self.position, self.version, self.events = checkpoint.position, checkpoint.schema_version, checkpoint.events
            self.schemas = resumer.schemas(self.version) or self._describe()
            self.ahead = dict(checkpoint.ahead)
            reason = "checkpoint"
            if self.pipeline.startup_mode != "initial" and not report.start:
                log.info("a checkpoint exists: startup_mode %s is not used", self.pipeline.startup_mode)
            reason = self._follow_config(reason)
        else:
            self.position, reason = resolve_start(rt)
            self.version, self.events = 0, 0
            self.schemas = self._describe()
            log.info("no checkpoint: starting at %s (%s)", self.position, reason)
            # Version 0 of the schemas goes with the first checkpoint.
            self._pending_schema = resumer.schema_records(0, self.schemas)
        if not report.start:
            report.start, report.start_reason = str(self.position), reason
        report.checkpoint, report.schema_version = self.position, self.version
        self.skip = split_watermarks(rt) if self.pipeline.exactly_once else {}
        self.horizons = snapshot_horizons(rt)
        self.members_checked = time.monotonic()
        self.batch, self.opened, self.idle_at = Batch(), time.monotonic(), None
        self._parts: Parts | None = None
        self._applying: _Applying | None = None  # the target's work on the batch (or part) before this one
        self.images = ImageWriter(rt)  # before-images while a savepoint exists
        self.pacer: ChangePacer | None = None  # pipeline.read_limit; one lane of a session paces (_Session._hand_pacer)

    def _follow_config(self, reason: str) -> str:
        """Tables added to or removed from source.tables since the checkpoint's schema version: removed ones stop
        being applied, finished ones join from their own start (see engine/membership.py)."""
        members = membership(self.rt, self.schemas)
        self.report.waiting = members.waiting
        for table in members.waiting:
            log.warning("not applied yet, waiting for its snapshot: %s", table)
        if not members.changed:
            return reason
        schemas = {t: s for t, s in self.schemas.items() if t not in members.removed}
        for table in members.removed:
            log.warning("%s was removed from source.tables: its changes are no longer applied (the target table is "
                        "left as it is) and its plan is dropped; adding it back snapshots it again", table)
            self.rt.plans.delete(table)
            self.ahead.pop(table, None)
        earliest_log = self.rt.log.earliest() if members.joining else None
        applied = {t: self.ahead.get(t, self.position) for t in schemas}
        for table, start in sorted(members.joining.items()):
            if is_before(start, earliest_log):
                raise PositionLost(
                    f"{table} joins the log phase from its snapshot's low watermark {start}, but the source keeps "
                    f"its log only from {earliest_log}", f"re-snapshot {table}: remove it from source.tables, run "
                    "one sync, add it back (it is planned and snapshotted again)")
            schemas[table] = describe(self.rt, table)
            applied[table] = start
            log.info("%s joins the log phase from %s, the minimum low watermark of its splits", table, start)
        self.schemas = schemas
        self.position = earliest(list(applied.values())) if applied else self.position
        self.ahead = {t: p for t, p in applied.items() if is_before(self.position, p)}
        self.version += 1
        self._pending_schema = self.rt.resumer.schema_records(self.version, self.schemas)
        self.report.joined += [str(t) for t in sorted(members.joining)]
        self.report.removed += [str(t) for t in members.removed]
        return f"{reason}; " + "; ".join(
            [f"{t} joins from {p}" for t, p in sorted(members.joining.items())]
            + [f"{t} removed" for t in members.removed])

    def _describe(self) -> dict[TableId, TableSchema]:
        return {t: describe(self.rt, t) for t in self.rt.config.source.table_ids}

    def behind(self, start: Position) -> None:
        """The session reads from `start`, before this lane's checkpoint: skip what it holds already."""
        if not is_before(start, self.position):
            return
        self.floor = self.position
        # Parts of a transaction are held whole until its end shows whether this lane holds it (_may_skip).
        self.ahead = {t: self.ahead.get(t, self.position) for t in self.schemas}

    def step(self, item, drained: Callable[[float], bool]) -> None:
        """Take one item of the log: batch it; apply and checkpoint when the batch is full, or when the reader has
        nothing more to hand out (`drained`) within pipeline.max_batch_delay_ms of the previous batch's end. A
        followed log is thus committed as it comes, one batch per what arrived during the last apply, while a
        backlog keeps the read-ahead queue filled and its batches grow to checkpoint_after_events. The wait
        bounds the commits of a stream of tiny transactions to one per delay, and keeps a backlog batching while
        the reader is a moment behind."""
        if self._applying is not None and self._applying.ended:
            self._settle()  # its checkpoint recorded as soon as it committed, not when the next batch is ready
        if self.floor is not None and self._parts is None:
            at = item.end if isinstance(item, Transaction) else getattr(item, "position", None)
            if at is not None and not is_before(self.floor, at):
                return  # this target applied it before
            if isinstance(item, Transaction):
                self.floor = None  # past its checkpoint: from here on it applies what the others apply
        pipeline = self.pipeline
        limit_events, interval = pipeline.checkpoint_after_events, pipeline.checkpoint_interval_secs
        batch = self.batch
        if isinstance(item, TransactionPart):
            if self._parts is None:
                self._flush(batch)  # a transaction in parts has a target transaction of its own
                batch = self.batch = Batch()
            self._part(item)
        elif isinstance(item, Transaction):
            if self._parts is not None:
                self._finish_parts(item)
                self.opened = time.monotonic()
            else:
                batch.add(self._filter(item))
        elif isinstance(item, Idle) and self._parts is None:
            self.idle_at = item.position
            if not batch:
                self.report.lag_seconds = 0.0
        elif isinstance(item, SchemaChange):
            self._flush(batch)
            batch = self.batch = Batch()
            self._schema_change(item)
        full = batch.events >= limit_events or (batch and (time.monotonic() - self.opened >= interval or (
            isinstance(item, Idle) and item.flush) or drained(self._delay_left())))
        if full or (self.stop.is_set() and batch):
            self._flush(batch)
            self.batch, self.opened = Batch(), time.monotonic()
        elif not batch and self.idle_at is not None and time.monotonic() - self.opened >= interval:
            self._advance(self.idle_at)  # quiet: move the checkpoint so lag reads 0 and the log can be released
            self.opened = time.monotonic()
        if not self.batch and self._parts is None and not self.stop.is_set() and self._members_changed():
            raise _Restart()  # a table finished its snapshot meanwhile: reopen the log from its start

    def _delay_left(self) -> float:
        """Seconds the batch may still wait for the reader: up to max_batch_delay_ms after the previous batch."""
        return max(0.0, self.opened + self.pipeline.max_batch_delay_ms / 1000 - time.monotonic())

    @property
    def settled(self) -> bool:
        """No transaction in parts is open: stopping now throws nothing half-applied away."""
        return self._parts is None

    def finish(self) -> None:
        """The log ended (or a stop): apply what is batched, and move the checkpoint to the last quiet point."""
        self._flush(self.batch)
        self.batch = Batch()
        if self.idle_at is not None:
            self._advance(self.idle_at)
        self._settle()

    def _settle(self) -> None:
        """Wait for the target's work in flight (raising its error); once it committed, what follows its commit."""
        applying, self._applying = self._applying, None
        if applying is not None:
            applying.wait()
            applying.done(applying.seconds)

    def _hand_over(self, work: Callable[[], None], done: Callable[[float], None]) -> None:
        """The target's work on a batch or part goes to a thread of its own once the work before it settled, so
        that this thread prepares the next one (compaction, the sink's rendering) meanwhile. One at a time, in
        log order, on the target's one commit connection."""
        self._settle()
        self._applying = _Applying(work, done)

    def _members_changed(self) -> bool:
        """Every MEMBERSHIP_CHECK_SECS, and only in a checkpointed session: has a table finished its snapshot?"""
        if time.monotonic() - self.members_checked < MEMBERSHIP_CHECK_SECS or self._pending_schema:
            return False
        self.members_checked = time.monotonic()
        return bool(membership(self.rt, self.schemas).joining)

    def _filter(self, tx: Transaction) -> Transaction:
        """Leave out changes of tables that applied the log past this transaction already (`ahead`), and, with
        exactly-once, changes the snapshot already holds (at or before their split's high watermark)."""
        if self.ahead:
            kept = [c for c in tx.changes
                    if not ((p := self.ahead.get(c.table)) and not is_before(p, tx.end, _ahead_of(c.table)))]
            self.report.skipped += len(tx.changes) - len(kept)
            self.ahead = {t: p for t, p in self.ahead.items() if is_before(tx.end, p, _ahead_of(t))}
            tx = Transaction(kept, tx.end, tx.commit_time, tx.xid) if len(kept) != len(tx.changes) else tx
        if not self.skip:
            return tx
        parts = [p for c in tx.changes for p in split_key_change(c, self.schemas[c.table].primary_key)]
        kept = [p for p in parts if not ((w := self.skip.get(p.table)) and w.holds(p.key[0], tx.end))]
        self.report.skipped += len(parts) - len(kept)
        self.skip = {t: w for t, w in self.skip.items() if not w.plain(tx.end)}  # past it: plain log mode
        return Transaction(kept, tx.end, tx.commit_time, tx.xid) if len(kept) != len(parts) else tx

    def _may_skip(self, floor: Position) -> bool:
        """Might `_filter` skip changes of a transaction that ends after `floor`? Which ones depends on that
        end, known only at its commit."""
        return (any(is_before(floor, p) for p in self.ahead.values())
                or any(not w.plain(floor) for w in self.skip.values()))

    def _part(self, part: TransactionPart) -> None:
        parts = self._parts
        if parts is None:
            self._settle()  # the batch before it commits on the same connection first
            if self._may_skip(part.floor):
                log.warning("a transaction of more than %d changes committed while the snapshot ran or before a "
                            "table's own position (before %s): held whole until its commit, which filtering needs",
                            self.pipeline.transaction_part_events, part.floor)
                parts = self._parts = Parts(None, [])
            else:
                parts = self._parts = Parts(TargetTransaction(self.rt.sink), None)
        if parts.held is not None:
            parts.held.extend(part.changes)
            return
        net = self._prepare(part.changes, part.floor)

        def work() -> None:
            self._apply(parts.target.cursor, part.changes, net, parts.tally)
            crash_point("incremental.part_applied")

        def applied(seconds: float) -> None:
            parts.tally.seconds += seconds

        self._hand_over(work, applied)

    def _finish_parts(self, tx: Transaction) -> None:
        parts = self._parts
        if parts.held is not None:
            self._parts = None
            whole = Batch()
            whole.add(self._filter(Transaction(parts.held + tx.changes, tx.end, tx.commit_time, tx.xid)))
            self._flush(whole)
            return
        rest = self._filter(tx).changes
        net = self._prepare(rest)
        self._settle()  # the last part: its tally
        earlier = parts.tally.seconds
        self._checkpoint(parts.tally.events + len(rest), tx.end,
                         lambda cur: self._apply(cur, rest, net, parts.tally), parts.target,
                         done=lambda seconds: self._applied(parts.tally, 1, tx.commit_time, earlier + seconds))
        self._parts = None

    def _abandon_parts(self) -> None:
        """The stream ended inside a transaction in parts: none of it counts. The work in flight is waited for
        first; its error, if any, is not the one to report (the one ending the session is)."""
        try:
            self._settle()
        except Exception as exc:
            log.warning("the target's work in flight failed as the session ended: %s", one_line(exc))
        if self._parts is not None and self._parts.target is not None:
            self._parts.target.rollback()
        self._parts = None

    def _flush(self, batch: Batch) -> None:
        if not batch:
            return
        changes = [c for tx in batch.transactions for c in tx.changes]
        tally, net = Tally(), self._prepare(changes)
        self._checkpoint(batch.events, batch.end, lambda cur: self._apply(cur, changes, net, tally),
                         done=lambda seconds: self._applied(tally, len(batch.transactions), batch.commit_time, seconds))

    def _prepare(self, changes: list[RowChange], floor: Position | None = None) -> dict[TableId, TableChanges]:
        """What needs no target: the changes compacted by key, and what the sink renders of them. `floor`: a
        transaction part's, for changes not positioned yet (PostgreSQL's, at the commit), which lies after it."""
        net = compact(changes, self.schemas)
        first = changes[0].position if changes else None
        if first is None:
            first = floor
        for table, table_changes in net.items():
            table_changes.replaying_until = self._replaying_until(table, first)
            table_changes.floor, table_changes.in_parts = floor, self._parts is not None  # see _part, _finish_parts
            check_fit(self.rt.sink, self.schemas[table], table_changes, changes, floor or self.position)
            self.rt.sink.prepare_changes(self.schemas[table], table_changes)
        if self.pacer is not None:
            self.pacer.count(changes)
        return net

    def _replaying_until(self, table: TableId, first: Position | None) -> Position | None:
        """The table's snapshot horizon while a batch whose changes lie at or after `first` may replay what the
        snapshot read: once `first` is past the horizon, none of them is before it."""
        horizon = self.horizons.get(table)
        if horizon is None or first is None:
            return horizon
        try:
            return None if is_before(horizon, first) else horizon
        except PositionsIncomparable:  # another server's log (a failover): each move is judged alone, as before
            return horizon

    def _apply(self, cursor, changes: list[RowChange], net: dict[TableId, TableChanges], tally: Tally) -> None:
        self.images.capture(cursor, self.schemas, net)  # before anything of the batch is written
        for table, table_changes in net.items():
            self.rt.sink.apply_changes(cursor, self.schemas[table], table_changes)
        tally.events += len(changes)
        tally.rows += sum(tc.size for tc in net.values())
        for table, table_changes in net.items():
            tally.per_table[str(table)] = tally.per_table.get(str(table), 0) + table_changes.events

    def _applied(self, tally: Tally, transactions: int, commit_time: float | None, target_secs: float) -> None:
        report = self.report
        self._timed(tally, transactions, target_secs)
        report.batches += 1
        report.transactions += transactions
        report.events += tally.events
        report.rows_written += tally.rows
        for table, n in tally.per_table.items():
            report.per_table[table] = report.per_table.get(table, 0) + n
        if commit_time is not None:
            report.lag_seconds = max(0.0, time.time() - commit_time)
        if self.on_batch is not None:
            self.on_batch(report)
        if self.pacer is not None:
            self.pacer.pace()  # pipeline.read_limit: a transaction in parts is paced once, after its commit

    def _timed(self, tally: Tally, transactions: int, target_secs: float) -> None:
        """Report a batch whose target apply outlasted pipeline.checkpoint_timeout_secs, with what to tune."""
        found = slow(str(self.position), tally.events, tally.rows, transactions, target_secs,
                     self.pipeline.checkpoint_timeout_secs, self.pipeline.checkpoint_after_events)
        if found is None:
            return
        log.warning(found.advice())
        self.report.slow_batches += 1
        if self.report.slowest is None or found.target_secs > self.report.slowest.target_secs:
            self.report.slowest = found

    def _advance(self, position: Position) -> None:
        self._settle()  # `position` must be ahead of what is in flight
        # Not while a transaction in parts is open: its own checkpoint comes with its commit, later.
        if self._parts is None and is_before(self.position, position):
            self._checkpoint(0, position)

    def _checkpoint(self, events: int, position: Position, apply: Callable | None = None,
                    target: TargetTransaction | None = None, extra: list | None = None,
                    done: Callable[[float], None] | None = None) -> None:
        """Apply (maybe nothing) and checkpoint at `position`, in `target` or a new target transaction: with
        `from_target` the checkpoint commits with the changes, else it is written right after their commit.
        With `done`, the target's part is handed over (`_hand_over`) and this returns at once; once it committed,
        the checkpoint is recorded and `done(seconds it took)` called, on this thread."""
        self._settle()
        rt, resumer = self.rt, self.rt.resumer
        self.events += events
        self.ahead = {t: p for t, p in self.ahead.items() if is_before(position, p)}
        records = [*self._pending_schema, *(extra or []),
                   *resumer.checkpoint_records(Checkpoint(position, self.version, self.events, self.ahead))]
        target = target or TargetTransaction(rt.sink)

        def work() -> None:
            try:
                if apply is not None:
                    apply(target.cursor)
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
            self._pending_schema = []
            self.position = self.report.checkpoint = position
            self.report.schema_version = self.version
            self.acknowledge()
            if done is not None:
                done(seconds)

        if done is None:
            began = time.monotonic()
            work()
            committed(time.monotonic() - began)
        else:
            self._hand_over(work, committed)

    def _schema_change(self, change: SchemaChange) -> None:
        self._settle()
        table = change.table
        schema = settle(change, self.schemas.get(table), self.pipeline.schema_change_policy, self.rt.sink,
                        lambda t: describe(self.rt, t))
        if schema is None:
            self._advance(change.position)
            return
        self._abandon_parts()  # the restart reads its transaction again, with the new definitions
        self.schemas = {**self.schemas, table: schema}
        self.version += 1
        self._checkpoint(0, change.position, extra=self.rt.resumer.schema_records(self.version, self.schemas))
        raise _Restart()


class _Applying:
    """A lane's target work running on a thread of its own (`_Lane._hand_over`); `done(seconds it took)` is what
    the lane does after it, on the lane's thread."""

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


def _ahead_of(table) -> str:
    return f"where {table} applied the log up to (it joined from its own snapshot)"


def _measure_lag(rt: TaskRuntime, report: SyncReport, end: Callable[[], Position]) -> None:
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
