"""The snapshot of a batch of splits of one table: low watermark, Spark read and staging write, high
watermark, then one target transaction (`sink.transaction()`, as the log phase uses) that replaces the splits'
rows with the staged ones, applies the backfill and (with `from_target`) writes the finished markers. Splits
already finished are skipped, never re-read, unless their last verification failed (engine/repair.py).

With several targets, a group of splits is read from the source once (one query selecting every format the
targets ask for, the Spark frame cached across their writes) and written to each target that has not finished it; each target
commits in its own transaction with its own finished markers. A split is finished for the task when
`pipeline.commit_policy` is met; a target the policy tolerates may fail without failing the split, and reads the
split when it is materialized again. A target that finished a split never has it written again.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.boundary import RowExport, SplitLeases, SplitRanges
from cdc_assets.core.positions import position_from_json
from cdc_assets.core.splits import Split, SplitPlan
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.engine.backfill import backfill
from cdc_assets.engine.planning import carried_now
from cdc_assets.engine.repair import Window, held_for_repair, lock_free, needing_repair, wait_for_sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.split_failures import SplitFailed, failed_target, split_failed
from cdc_assets.errors import NETWORK_HINT, CdcError, PlanError, UnreachableError
from cdc_assets.resumer.resumer import SplitWatermarks
from cdc_assets.engine.faults import crash_point
from cdc_assets.engine.target_down import answering
from cdc_assets.spark.parallelism import parallelism
from cdc_assets.spark.staging import stage_each

log = logging.getLogger("cdc_assets.snapshot")


@dataclass(frozen=True)
class SplitResult:
    split_id: str
    rows: int
    bytes: int
    low_watermark: str
    high_watermark: str
    seconds: float
    skipped: bool = False  # finished before this run: not read again
    # A repair (engine/repair.py): the rows of the split it left as the sync made them (the log changed them while
    # it read); None when the split was not repaired.
    kept: int | None = None
    targets: dict[str, str] = field(default_factory=dict)  # with several targets: what each one did


def snapshot_splits(rt: TaskRuntime, table: TableId, split_ids: list[str]) -> list[SplitResult]:
    plan = rt.plans.load(table)
    if plan is None:
        raise PlanError(f"{table} has no split plan", "run `cdc-assets plan` first")
    if len(rt.lanes) > 1:
        return _snapshot_lanes(rt, plan, split_ids)
    finished = rt.resumer.finished(split_ids, plan.plan_id)
    again = needing_repair(rt, finished)  # failed their verification: read again (engine/repair.py)
    done = [_skipped(finished[s]) for s in split_ids if s in finished and s not in again]
    todo = [plan.split(s) for s in split_ids if s not in finished or s in again]
    if not todo:
        return done
    schema = carried_now(rt, table)
    with held_for_repair(rt, [rt], plan, schema, [s for s in todo if s.id in again]):
        return done + _pipeline(rt, [rt], plan, schema, todo, again)


def _snapshot_lanes(rt: TaskRuntime, plan: SplitPlan, split_ids: list[str]) -> list[SplitResult]:
    """Several targets: each split goes to the targets that have not finished it, grouped by which ones."""
    policy = rt.policy
    finished, unanswered = answering(rt.lanes, lambda lane: lane.resumer.finished(split_ids, plan.plan_id))
    needed = [name for name in unanswered if not policy.tolerates(name)]
    if needed:
        raise UnreachableError(f"target {needed[0]} does not answer: {unanswered[needed[0]]}", NETWORK_HINT)
    down = {name: f"failed: {why}" for name, why in unanswered.items()}
    for name, why in down.items():
        log.warning("target %s is not snapshotted in this run: %s", name, why)
    up = [lane for lane in rt.lanes if lane.name not in down]
    wanted: dict[tuple[str, ...], list[str]] = {}
    results = []
    # Failed their verification in that target: read again for it (engine/repair.py).
    again = {lane.name: needing_repair(lane, finished[lane.name]) for lane in up}
    for split_id in split_ids:
        names = tuple(lane.name for lane in up if split_id not in finished[lane.name] or split_id in again[lane.name])
        if names:
            wanted.setdefault(names, []).append(split_id)
            continue
        first = next(iter(finished[lane.name][split_id] for lane in up))
        results.append(_skipped(first, {lane.name: "finished before" for lane in up} | down))
    if not wanted:
        return results
    schema = carried_now(rt, plan.table)
    for lane in up:
        if any(lane.name in names for names in wanted):
            lane.sink.ensure_table(schema)  # a target that was down when the task was planned
    repairing = set().union(*again.values())
    for names, ids in wanted.items():
        lanes = [lane for lane in up if lane.name in names]
        with held_for_repair(rt, lanes, plan, schema, [plan.split(s) for s in ids if s in repairing]):
            group = _pipeline(rt, lanes, plan, schema, [plan.split(s) for s in ids], repairing)
        for r in group:
            if r.skipped:  # another run finished it in every target of this group meanwhile
                r = replace(r, targets={n: "finished before" for n in names})
            acknowledged = {n for n, what in r.targets.items() if what.startswith(("rows", "finished"))}
            acknowledged |= {lane.name for lane in up if lane.name not in names}
            if not policy.met(acknowledged):
                raise SplitFailed(f"{r.split_id} of {plan.table} is not finished for the task: "
                                  f"{policy.missing(acknowledged)} ({r.targets | down})",
                                  "bring the targets named back, then materialize the split again")
            before = {lane.name: "finished before" for lane in up if lane.name not in names}
            results.append(replace(r, targets={**r.targets, **down, **before}))
    return results


@dataclass
class _Staged:
    """One target's side of a group: its staging table, the export it was written from, its read counts, and
    (after the commit) its finished markers."""

    lane: TaskRuntime
    staging: TableId
    export: RowExport
    reads: dict[str, int]
    finished: list = field(default_factory=list)
    # Rows staged per split index, as the staging write's tasks counted them (COPY); None: the commit counts them.
    counts: dict[int, int] | None = None


@dataclass
class _StagedGroup:
    """Splits read into one staging table per target, waiting for their commit."""

    splits: list[Split]
    marks: list[SplitWatermarks]
    targets: list[_Staged]
    started: float
    failed: dict[str, str] = field(default_factory=dict)  # a tolerated target whose staging write failed


def _pipeline(rt: TaskRuntime, lanes: list[TaskRuntime], plan: SplitPlan, schema: TableSchema, splits: list[Split],
              again: set[str] = frozenset()) -> list[SplitResult]:
    """Read groups of splits one Spark job at a time (`splits_per_slot` per task the session runs at once),
    committing each group while the next one reads.

    The commit is one PostgreSQL/MySQL backend working alone: overlapping it with the next read keeps both
    cores busy, and where the sink allows (`concurrent_commits`: PostgreSQL) two groups commit at once, on
    connections of their own. Results and finished markers are settled in the groups' order. Each group has its
    own watermarks; finished markers follow each group's commit. A group's
    splits are leased (the sink's split locks) from before its low watermark until its commit settled."""
    width = parallelism(rt.spark) * min(lane.sink.splits_per_slot for lane in lanes)
    repairs = [s for s in splits if s.id in again] if lock_free(lanes) else []
    fresh = [s for s in splits if s not in repairs]
    groups = [fresh[i:i + width] for i in range(0, len(fresh), width)]
    results: list[SplitResult] = []
    pending: list[tuple[_StagedGroup, Future]] = []
    locks = _leases(rt).sink.split_locks(rt.config.task_id)
    try:
        with ThreadPoolExecutor(max_workers=min(lane.sink.concurrent_commits for lane in lanes),
                                thread_name_prefix="cdc-commit") as committer:
            try:
                for group in groups:
                    group = _lease(rt, lanes, locks, plan, group, results, again)
                    if not group:
                        continue
                    staged = _read_group(rt, lanes, plan, schema, group)
                    pending.append((staged, committer.submit(_commit_group, rt, plan, schema, staged)))
                    results += _settle(rt, pending, locks, wait=False)
            finally:
                results += _settle(rt, pending, locks, wait=True)
        for split in repairs:  # one at a time, each in a window of its own, committed on this thread
            if _lease(rt, lanes, locks, plan, [split], results, again):
                results += _repair(rt, lanes, plan, schema, split, locks)
    finally:
        locks.close()
    return results


def _repair(rt: TaskRuntime, lanes: list[TaskRuntime], plan: SplitPlan, schema: TableSchema, split: Split,
            locks: SplitLeases) -> list[SplitResult]:
    """A split read again lock-free (engine/repair.py): its window opened before the read, its commit after
    the sync passed the read's high watermark."""
    window = Window.open(rt, plan, schema, split)
    try:
        staged = _read_group(rt, lanes, plan, schema, [split])
        wait_for_sync([t.lane for t in staged.targets], split, staged.marks[0].high)
        window.read_ahead(rt, plan, schema)
    except BaseException:
        locks.release([split.id])
        raise
    done: Future = Future()
    try:
        done.set_result(_commit_group(rt, plan, schema, staged, window))
    except Exception as exc:
        done.set_exception(exc)
    return _settle(rt, [(staged, done)], locks, wait=True)


def _leases(rt: TaskRuntime) -> TaskRuntime:
    """Where the split leases live: the first target the policy cannot do without (the same for every run)."""
    return next((lane for lane in rt.lanes if not rt.policy.tolerates(lane.name)), rt.lanes[0])


def _lease(rt: TaskRuntime, lanes: list[TaskRuntime], locks: SplitLeases, plan: SplitPlan, group: list[Split],
           results: list[SplitResult], again: set[str]) -> list[Split]:
    """Lease the group's splits; those another run finished while this one waited are reported as skipped
    (`again`: being repaired, unless another run repaired them meanwhile)."""
    locks.acquire([s.id for s in group], rt.config.snapshot.split_lock_timeout_secs)
    of_lanes = [lane.resumer.finished([s.id for s in group], plan.plan_id) for lane in lanes]
    # Finished in every target this run writes: nothing left to do.
    finished = {s: r for s, r in of_lanes[0].items() if all(s in other for other in of_lanes[1:])}
    redo = set().union(*(needing_repair(lane, {s: r for s, r in mine.items() if s in again and s in finished})
                         for lane, mine in zip(lanes, of_lanes)))
    done = [s.id for s in group if s.id in finished and s.id not in redo]
    locks.release(done)
    results += [_skipped(finished[s]) for s in done]
    return [s for s in group if s.id not in done]


def _read_group(rt: TaskRuntime, lanes: list[TaskRuntime], plan: SplitPlan, schema: TableSchema,
                splits: list[Split]) -> _StagedGroup:
    started = time.monotonic()
    source = rt.source
    formats = [lane.sink.target_format() for lane in lanes]
    if len(lanes) == 1:
        exports = [source.export(plan, schema, splits, formats[0])]
    else:  # one read of the source for every target, wherever it can select all their formats at once
        exports = source.export_together(plan, schema, splits, formats)
    targets: list[_Staged] = []
    for lane, export in zip(lanes, exports):
        staging = lane.sink.staging_table(schema.table, splits[0].index)
        lane.sink.create_staging(staging, export, schema.primary_key)
        targets.append(_Staged(lane, staging, export, {}))
    ids = [s.id for s in splits]
    low = source.current_position()
    lows = [SplitWatermarks(s, plan.plan_id, low) for s in splits]
    for staged in targets:
        staged.reads = staged.lane.resumer.record_low(lows)
    _call(rt.hooks.after_low, ids)
    failed: dict[str, str] = {}
    pairs = [(t.export, t.lane.sink.staging_write(t.staging, t.export)) for t in targets]
    try:
        errors, counts = stage_each(rt.spark, pairs, rt.config.snapshot.fetch_size, rt.config.snapshot.read_limit)
    except Exception as exc:  # a worker's or a driver's error, wrapped by Spark
        errors, counts = [exc] * len(targets), None
    if counts is not None and len(counts) == len(splits):
        targets[0].counts = {s.index: n for s, n in zip(splits, counts)}
    for staged, exc in zip(targets, errors):
        if exc is None:
            continue
        if len(lanes) > 1 and rt.policy.tolerates(staged.lane.name):
            failed[staged.lane.name] = failed_target(rt, staged, splits, lows, exc)
            continue
        raise split_failed(staged.lane, splits, lows, staged.reads, exc, where="in Spark" if len(lanes) == 1 else
                      f"in Spark (target {staged.lane.name})",
                      detail=source.explain_failure(schema, staged.export, exc)) from None
    _call(rt.hooks.after_write, ids)
    high = source.current_position()
    marks = [SplitWatermarks(s, plan.plan_id, low, high) for s in splits]
    targets = [staged for staged in targets if staged.lane.name not in failed]
    for staged in targets:
        staged.lane.resumer.record_high(marks, staged.reads)
    _call(rt.hooks.after_high, ids)
    return _StagedGroup(splits, marks, targets, started, failed)


@dataclass(frozen=True)
class _Committed:
    rows_by_split: dict[int, int]  # by split index
    staged_bytes: int
    kept: int | None = None  # a repair's rows left as the sync made them


def _commit_group(rt: TaskRuntime, plan: SplitPlan, schema: TableSchema, staged: _StagedGroup,
                  window: Window | None = None) -> dict[str, _Committed | Exception]:
    """Runs on the commit thread: touches only the sinks' commit connections and pure resumer methods. Each
    target commits on its own; with several, one's failure is returned for `_settle` to judge."""
    out: dict[str, _Committed | Exception] = {}
    for target in staged.targets:
        try:
            out[target.lane.name] = _commit_target(target.lane, plan, schema, staged, target, window)
        except Exception as exc:
            if len(staged.targets) + len(staged.failed) == 1:
                raise
            out[target.lane.name] = exc
    return out


def _commit_target(rt: TaskRuntime, plan: SplitPlan, schema: TableSchema, staged: _StagedGroup,
                   target: _Staged, window: Window | None = None) -> _Committed:
    """One target transaction: the staged rows replace the splits' ranges, rows the source deleted go, the
    backfill brings the keys to the high watermark, and (with `from_target`) the finished markers are written;
    all of it commits, or none. A repair (`window`) holds the range in the target first and keeps the rows of the
    keys the log changed since its window opened (engine/repair.py)."""
    sink = rt.sink
    by_index = {s.index: s.id for s in staged.splits}
    replace = SplitRanges(plan.key_kind, tuple(s.range for s in staged.splits),
                          sink.check_key_order(plan.key_kind, rt.source.db_type))
    staged_bytes = sink.staged_bytes(target.staging)
    kept = None
    with sink.transaction() if window is None else sink.repair_transaction(schema, replace) as tx:
        if window is not None:
            kept = sink.keep_rows(tx, schema, window.changed(rt, plan, schema), replace)
            # Key by key: a range delete would take rows the sync inserted into the range and committed after
            # the hold (READ COMMITTED leaves gaps free); rows the source deleted go by `_remove_deleted`.
            replace = SplitRanges(replace.kind, replace.ranges, by_range=False)
        counts = sink.merge_staged(tx, schema, target.staging, target.export, replace, target.counts)
        if not replace.by_range:
            _remove_deleted(rt, tx, schema, target, replace)
        if kept is not None:
            kept.put_back(tx)
        elif rt.config.pipeline.exactly_once:
            mark = staged.marks[0]
            backfill(rt, tx, schema, plan, staged.splits, mark.low, mark.high)
        target.finished.extend(rt.resumer.finished_records(staged.marks, {by_index[i]: n for i, n in counts.items()}))
        if rt.resumer.writes_in_target:
            rt.resumer.write_in(tx, target.finished)
    sink.drop_staging(target.staging)
    return _Committed(counts, staged_bytes, None if kept is None else kept.rows)


def _remove_deleted(rt: TaskRuntime, cursor, schema: TableSchema, staged: _Staged, replace: SplitRanges) -> None:
    """Where the target cannot judge the splits' ranges (text keys): of the keys it holds in them by its own order
    but the group did not stage, delete those the source no longer has. A key the source still has belongs to
    another split, which replaces it; one re-inserted after this read comes back through the log."""
    candidates = rt.sink.unstaged_keys(cursor, schema, staged.staging, staged.export, replace)
    if not candidates:
        return
    gone = set(candidates) - rt.source.present_keys(schema, candidates)
    if gone:
        rt.sink.apply_changes(cursor, schema, TableChanges(schema.table, deletes=gone))


def _settle(rt: TaskRuntime, pending: list, locks: SplitLeases, wait: bool) -> list[SplitResult]:
    """Record finished markers of committed groups (on this thread, which owns the position stores), then give
    their leases back."""
    results = []
    while pending and (wait or pending[0][1].done()):
        staged, future = pending.pop(0)
        try:
            committed = future.result()  # a failed commit raises here: its splits stay unfinished
        except CdcError:
            raise
        except Exception as exc:
            [target] = staged.targets
            raise split_failed(target.lane, staged.splits, staged.marks, target.reads, exc,
                          "in the target's commit") from None
        crash_point("snapshot.after_commit")  # committed in the target, not yet finished for other resumers
        states = dict(staged.failed)
        done: dict[str, _Committed] = {}
        for target in staged.targets:
            result = committed[target.lane.name]
            if isinstance(result, Exception):
                if not rt.policy.tolerates(target.lane.name):
                    raise split_failed(target.lane, staged.splits, staged.marks, target.reads, result,
                                  f"in the commit of target {target.lane.name}") from None
                states[target.lane.name] = failed_target(rt, target, staged.splits, staged.marks, result)
                continue
            target.lane.resumer.record_committed(target.finished)
            done[target.lane.name] = result
        locks.release([s.id for s in staged.splits])
        seconds = time.monotonic() - staged.started
        result = next(iter(done.values()), _Committed({}, 0))
        total = sum(result.rows_by_split.values()) or 1
        low, high = staged.marks[0].low, staged.marks[0].high
        several = len(rt.lanes) > 1
        for s in staged.splits:
            rows = result.rows_by_split.get(s.index, 0)
            each = {**states, **{n: f"rows {c.rows_by_split.get(s.index, 0)}" for n, c in done.items()}}
            results.append(SplitResult(s.id, rows, result.staged_bytes * rows // total, str(low), str(high), seconds,
                                       targets=each if several else {}, kept=result.kept))
    return results


def _skipped(record, targets: dict[str, str] | None = None) -> SplitResult:
    d = record.position_data
    return SplitResult(record.position_key, int(d.get("rows", 0)), 0, _text(d["low_watermark"]),
                       _text(d["high_watermark"]), 0.0, skipped=True, targets=targets or {})


def _text(position_json: dict) -> str:
    return str(position_from_json(position_json))


def _call(hook, ids: list[str]) -> None:
    if hook is not None:
        hook(ids)
