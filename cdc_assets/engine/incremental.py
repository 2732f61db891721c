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
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from cdc_assets.core.batches import Batch, compact, split_key_change
from cdc_assets.core.events import Idle, RowChange, SchemaChange, SchemaChangeKind, Transaction, TransactionPart
from cdc_assets.core.positions import Position, earliest, is_before
from cdc_assets.core.read_limit import ChangePacer
from cdc_assets.core.slow_batch import SlowBatch, slow
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.engine.faults import crash_point
from cdc_assets.engine.log_start import resolve_start, snapshot_horizons, split_watermarks
from cdc_assets.engine.membership import membership, release_bound
from cdc_assets.engine.planning import describe
from cdc_assets.engine.prefetch import prefetch
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.savepoints import ImageWriter, recover, task_lease
from cdc_assets.engine.schema_changes import SchemaChangeHalted, added_columns
from cdc_assets.engine.target_transaction import Parts, Tally, TargetTransaction
from cdc_assets.errors import PositionLost, UnreachableError
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
            f"{self.ended} after {self.seconds:.1f} s" + (f", {self.retries} reconnects" if self.retries else ""),
        ]


class _Restart(Exception):
    """Reopen the log with new schemas (after an applied ADD COLUMN)."""


def sync(rt: TaskRuntime, *, until_caught_up: bool = False, stop: threading.Event | None = None,
         on_batch: Callable[[SyncReport], None] | None = None) -> SyncReport:
    """Apply the log to the target until `stop` is set or, with `until_caught_up`, until the log end seen at the
    start. An unreachable source or target is retried with backoff; a lost position is not. Holds the task's
    lease (no savepoint command runs meanwhile) and first finishes an interrupted savepoint rollback."""
    with task_lease(rt, doing="sync"):
        recover(rt)
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
    _measure_lag(rt, report)
    return report


class _Session:
    """One connection's worth of reading: from the checkpoint to the end (or to a restart)."""

    def __init__(self, rt: TaskRuntime, report: SyncReport, stop: threading.Event,
                 on_batch: Callable[[SyncReport], None] | None) -> None:
        self.rt, self.report, self.stop, self.on_batch = rt, report, stop, on_batch
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
        self.reader = rt.log.reader(self.schemas)
        self._parts: Parts | None = None
        self.images = ImageWriter(rt)  # before-images while a savepoint exists
        limit = self.pipeline.read_limit  # paced after each checkpoint, since this session started
        self.pacer = ChangePacer(limit.rows_per_second, limit.bytes_per_second, stop.wait)

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

    def run(self, until: Position | None) -> None:
        if until is not None and not is_before(self.position, until):
            if self._pending_schema:
                self._checkpoint(0, self.position)  # nothing to read; the start is still worth recording
            return
        limit_events, interval = self.pipeline.checkpoint_after_events, self.pipeline.checkpoint_interval_secs
        batch, opened, idle_at = Batch(), time.monotonic(), None
        parts_of = self.pipeline.transaction_part_events
        items = prefetch(self.reader.read(self.position, stop_at=until, part_events=parts_of), self.reader.close)
        try:
            for item in items:
                if isinstance(item, TransactionPart):
                    if self._parts is None:
                        self._flush(batch)  # a transaction in parts has a target transaction of its own
                        batch = Batch()
                    self._part(item)
                elif isinstance(item, Transaction):
                    if self._parts is not None:
                        self._finish_parts(item)
                        opened = time.monotonic()
                    else:
                        batch.add(self._filter(item))
                elif isinstance(item, Idle) and self._parts is None:
                    idle_at = item.position
                    if not batch:
                        self.report.lag_seconds = 0.0
                elif isinstance(item, SchemaChange):
                    self._flush(batch)
                    batch = Batch()
                    self._schema_change(item)
                full = batch.events >= limit_events or (batch and (time.monotonic() - opened >= interval or (
                    isinstance(item, Idle) and item.flush)))
                if full or (self.stop.is_set() and batch):
                    self._flush(batch)
                    batch, opened = Batch(), time.monotonic()
                elif not batch and idle_at is not None and time.monotonic() - opened >= interval:
                    self._advance(idle_at)  # quiet: move the checkpoint so lag reads 0 and the log can be released
                    opened = time.monotonic()
                # A transaction in parts is finished first: stopping would throw its parts away, and runs
                # bounded in time could then never get past it.
                if self.stop.is_set() and self._parts is None:
                    break
                if not batch and self._parts is None and self._members_changed():
                    raise _Restart()  # a table finished its snapshot meanwhile: reopen the log from its start
            self._flush(batch)
            if idle_at is not None:
                self._advance(idle_at)
        finally:
            items.close()
            self._abandon_parts()

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
        began = time.monotonic()
        self._apply(parts.target.cursor, part.changes, parts.tally)
        parts.tally.seconds += time.monotonic() - began
        crash_point("incremental.part_applied")

    def _finish_parts(self, tx: Transaction) -> None:
        parts = self._parts
        if parts.held is not None:
            self._parts = None
            whole = Batch()
            whole.add(self._filter(Transaction(parts.held + tx.changes, tx.end, tx.commit_time, tx.xid)))
            self._flush(whole)
            return
        rest = self._filter(tx).changes
        began, earlier = time.monotonic(), parts.tally.seconds
        self._checkpoint(parts.tally.events + len(rest), tx.end,
                         lambda cur: self._apply(cur, rest, parts.tally), parts.target)
        self._parts = None
        self._applied(parts.tally, 1, tx.commit_time, earlier + time.monotonic() - began)

    def _abandon_parts(self) -> None:
        """The stream ended inside a transaction in parts: none of it counts."""
        if self._parts is not None and self._parts.target is not None:
            self._parts.target.rollback()
        self._parts = None

    def _flush(self, batch: Batch) -> None:
        if not batch:
            return
        changes = [c for tx in batch.transactions for c in tx.changes]
        tally, began = Tally(), time.monotonic()
        self._checkpoint(batch.events, batch.end, lambda cur: self._apply(cur, changes, tally))
        self._applied(tally, len(batch.transactions), batch.commit_time, time.monotonic() - began)

    def _apply(self, cursor, changes: list[RowChange], tally: Tally) -> None:
        net = compact(changes, self.schemas)
        self.images.capture(cursor, self.schemas, net)  # before anything of the batch is written
        for table, table_changes in net.items():
            table_changes.replaying_until = self.horizons.get(table)
            self.rt.sink.apply_changes(cursor, self.schemas[table], table_changes)
        tally.events += len(changes)
        self.pacer.count(changes)
        tally.rows += sum(tc.size for tc in net.values())
        for c in changes:
            tally.per_table[str(c.table)] = tally.per_table.get(str(c.table), 0) + 1

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
        # Not while a transaction in parts is open: its own checkpoint comes with its commit, later.
        if self._parts is None and is_before(self.position, position):
            self._checkpoint(0, position)

    def _checkpoint(self, events: int, position: Position, apply: Callable | None = None,
                    target: TargetTransaction | None = None, extra: list | None = None) -> None:
        """Apply (maybe nothing) and checkpoint at `position`, in `target` or a new target transaction: with
        `from_target` the checkpoint commits with the changes, else it is written right after their commit."""
        rt, resumer = self.rt, self.rt.resumer
        self.events += events
        self.ahead = {t: p for t, p in self.ahead.items() if is_before(position, p)}
        records = [*self._pending_schema, *(extra or []),
                   *resumer.checkpoint_records(Checkpoint(position, self.version, self.events, self.ahead))]
        target = target or TargetTransaction(rt.sink)
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
        resumer.record_committed(records)
        self._pending_schema = []
        self.position = self.report.checkpoint = position
        self.report.schema_version = self.version
        self.reader.acknowledge(release_bound(rt, self.schemas, position))

    def _schema_change(self, change: SchemaChange) -> None:
        policy, table = self.pipeline.schema_change_policy, change.table
        where = f"{table} at {change.position}"
        if change.kind is SchemaChangeKind.HARMLESS:
            log.info("DDL on %s leaves the columns as they are, continuing: %s", where, change.statement)
            self._advance(change.position)
            return
        if policy == "ignore":
            log.warning("DDL on %s ignored (schema_change_policy ignore): %s", where, change.statement)
            self._advance(change.position)
            return
        added = added_columns(change, self.schemas.get(table), lambda t: describe(self.rt, t), policy)
        if not added:
            raise SchemaChangeHalted(change, policy)
        self._abandon_parts()  # the restart reads its transaction again, with the new columns
        schema = self.schemas[table]
        self.rt.sink.add_columns(schema, added)
        self.schemas = {**self.schemas, table: TableSchema(table, schema.columns + tuple(added), schema.primary_key,
                                                                   schema.excluded)}
        self.version += 1
        log.info("DDL on %s: added columns %s to the target (schema version %d): %s", where,
                 [c.name for c in added], self.version, change.statement)
        self._checkpoint(0, change.position, extra=self.rt.resumer.schema_records(self.version, self.schemas))
        raise _Restart()


def _ahead_of(table) -> str:
    return f"where {table} applied the log up to (it joined from its own snapshot)"


def _measure_lag(rt: TaskRuntime, report: SyncReport) -> None:
    if report.checkpoint is None:
        return
    try:
        report.lag_unit = rt.log.distance_unit
        report.lag_bytes = rt.log.distance(report.checkpoint, rt.source.current_position())
    except UnreachableError:
        report.lag_bytes = None
    if report.lag_bytes == 0:
        report.lag_seconds = 0.0


def _fmt(value, unit: str) -> str:
    if value is None:
        return "unknown"
    return f"{value:.2f}{unit}" if isinstance(value, float) else f"{value}{unit}"
