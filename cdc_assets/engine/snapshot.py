"""The snapshot of a batch of splits of one table: low watermark, Spark read and staging write, high
watermark, then one target transaction (`sink.transaction()`, as the log phase uses) that replaces the splits'
rows with the staged ones, applies the backfill and (with `from_target`) writes the finished markers. Splits
already finished are skipped, never re-read, unless their last verification failed (engine/repair.py).
"""
from __future__ import annotations

import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.boundary import RowExport, SplitLeases, SplitRanges
from cdc_assets.core.positions import position_from_json
from cdc_assets.core.splits import Split, SplitPlan
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.engine.backfill import backfill
from cdc_assets.engine.planning import describe
from cdc_assets.engine.repair import held_for_repair, needing_repair
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import CdcError, PlanError
from cdc_assets.resumer.records import now_text
from cdc_assets.resumer.resumer import SplitWatermarks
from cdc_assets.engine.faults import crash_point
from cdc_assets.spark.errors import root_cause
from cdc_assets.spark.staging import stage

ERRORS_LOG = "errors.log"  # beside position.log: the full traces behind one-line split failures


@dataclass(frozen=True)
class SplitResult:
    split_id: str
    rows: int
    bytes: int
    low_watermark: str
    high_watermark: str
    seconds: float
    skipped: bool = False  # finished before this run: not read again


def snapshot_splits(rt: TaskRuntime, table: TableId, split_ids: list[str]) -> list[SplitResult]:
    plan = rt.plans.load(table)
    if plan is None:
        raise PlanError(f"{table} has no split plan", "run `cdc-assets plan` first")
    finished = rt.resumer.finished(split_ids)
    again = needing_repair(rt, finished)  # failed their verification: read again (engine/repair.py)
    done = [_skipped(finished[s]) for s in split_ids if s in finished and s not in again]
    todo = [plan.split(s) for s in split_ids if s not in finished or s in again]
    if not todo:
        return done
    schema = describe(rt, table)
    with held_for_repair(rt, plan, schema, [s for s in todo if s.id in again]):
        return done + _pipeline(rt, plan, schema, todo, again)


@dataclass
class _StagedGroup:
    """Splits read into one staging table, waiting for their commit."""

    splits: list[Split]
    staging: TableId
    export: RowExport
    marks: list[SplitWatermarks]
    reads: dict[str, int]
    started: float
    finished: list = field(default_factory=list)


def _pipeline(rt: TaskRuntime, plan: SplitPlan, schema: TableSchema, splits: list[Split],
              again: set[str] = frozenset()) -> list[SplitResult]:
    """Read groups of splits one Spark wave at a time, committing each group while the next one reads.

    The commit is one PostgreSQL/MySQL backend working alone: overlapping it with the next read keeps both
    cores busy. Each group has its own watermarks; finished markers follow each group's commit. A group's
    splits are leased (the sink's split locks) from before its low watermark until its commit settled."""
    width = max(1, rt.spark.sparkContext.defaultParallelism)
    groups = [splits[i:i + width] for i in range(0, len(splits), width)]
    results: list[SplitResult] = []
    pending: list[tuple[_StagedGroup, Future]] = []
    locks = rt.sink.split_locks(rt.config.task_id)
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cdc-commit") as committer:
            try:
                for group in groups:
                    group = _lease(rt, locks, group, results, again)
                    if not group:
                        continue
                    staged = _read_group(rt, plan, schema, group)
                    pending.append((staged, committer.submit(_commit_group, rt, plan, schema, staged)))
                    results += _settle(rt, pending, locks, wait=False)
            finally:
                results += _settle(rt, pending, locks, wait=True)
    finally:
        locks.close()
    return results


def _lease(rt: TaskRuntime, locks: SplitLeases, group: list[Split], results: list[SplitResult],
           again: set[str]) -> list[Split]:
    """Lease the group's splits; those another run finished while this one waited are reported as skipped
    (`again`: being repaired, unless another run repaired them meanwhile)."""
    locks.acquire([s.id for s in group], rt.config.snapshot.split_lock_timeout_secs)
    finished = rt.resumer.finished([s.id for s in group])
    redo = needing_repair(rt, {s: r for s, r in finished.items() if s in again})
    done = [s.id for s in group if s.id in finished and s.id not in redo]
    locks.release(done)
    results += [_skipped(finished[s]) for s in done]
    return [s for s in group if s.id not in done]


def _read_group(rt: TaskRuntime, plan: SplitPlan, schema: TableSchema, splits: list[Split]) -> _StagedGroup:
    started = time.monotonic()
    source, sink, resumer = rt.source, rt.sink, rt.resumer
    export = source.export(plan, schema, splits, sink.target_format())
    staging = sink.staging_table(schema.table, splits[0].index)
    sink.create_staging(staging, export, schema.primary_key)
    ids = [s.id for s in splits]
    low = source.current_position()
    reads = resumer.record_low([SplitWatermarks(s, plan.plan_id, low) for s in splits])
    _call(rt.hooks.after_low, ids)
    try:
        stage(rt.spark, export, sink.staging_write(staging, export), rt.config.snapshot.fetch_size,
              rt.config.snapshot.read_limit)
    except Exception as exc:  # a worker's or a driver's error, wrapped by Spark
        raise _failed(rt, splits, [SplitWatermarks(s, plan.plan_id, low) for s in splits], reads, exc,
                      detail=source.explain_failure(schema, export, exc)) from None
    _call(rt.hooks.after_write, ids)
    high = source.current_position()
    marks = [SplitWatermarks(s, plan.plan_id, low, high) for s in splits]
    resumer.record_high(marks, reads)
    _call(rt.hooks.after_high, ids)
    return _StagedGroup(splits, staging, export, marks, reads, started)


class SplitFailed(CdcError):
    """Reading or staging a group of splits failed inside Spark; the message is the root cause in one line."""


def _failed(rt: TaskRuntime, splits: list[Split], marks: list[SplitWatermarks], reads: dict[str, int],
            exc: Exception, where: str = "in Spark", detail: CdcError | None = None) -> SplitFailed:
    """One line for the CLI, the Dagster run and the position records; the whole trace to errors.log. `detail`:
    what the engine found out about the cause, after the database's message."""
    message, where = root_cause(exc, where)
    if detail is not None:
        message += f"; {detail.message} ({detail.hint})"
    ids = [s.id for s in splits]
    line = f"{ids[0]}..{ids[-1]} of {splits[0].table} failed {where}: {message}"
    rt.resumer.record_failed(marks, reads, line)
    log_dir = rt.config.log_dir
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / ERRORS_LOG, "a", encoding="utf-8") as out:
        out.write(f"{now_text()} | {line}\n{''.join(traceback.format_exception(exc))}\n")
    return SplitFailed(line, f"fix the cause, then materialize the splits again; the trace is in {log_dir / ERRORS_LOG}")


@dataclass(frozen=True)
class _Committed:
    rows_by_split: dict[int, int]  # by split index
    staged_bytes: int


def _commit_group(rt: TaskRuntime, plan: SplitPlan, schema: TableSchema, staged: _StagedGroup) -> _Committed:
    """Runs on the commit thread: touches only the sink's commit connection and pure resumer methods.

    One target transaction: the staged rows replace the splits' ranges, rows the source deleted go, the
    backfill brings the keys to the high watermark, and (with `from_target`) the finished markers are written;
    all of it commits, or none."""
    sink = rt.sink
    by_index = {s.index: s.id for s in staged.splits}
    replace = SplitRanges(plan.key_kind, tuple(s.range for s in staged.splits),
                          sink.check_key_order(plan.key_kind, rt.source.db_type))
    staged_bytes = sink.staged_bytes(staged.staging)
    with sink.transaction() as tx:
        counts = sink.merge_staged(tx, schema, staged.staging, staged.export, replace)
        if not replace.by_range:
            _remove_deleted(rt, tx, schema, staged, replace)
        if rt.config.pipeline.exactly_once:
            mark = staged.marks[0]
            backfill(rt, tx, schema, plan, staged.splits, mark.low, mark.high)
        staged.finished.extend(rt.resumer.finished_records(staged.marks, {by_index[i]: n for i, n in counts.items()}))
        if rt.resumer.writes_in_target:
            rt.resumer.write_in(tx, staged.finished)
    sink.drop_staging(staged.staging)
    return _Committed(counts, staged_bytes)


def _remove_deleted(rt: TaskRuntime, cursor, schema: TableSchema, staged: _StagedGroup, replace: SplitRanges) -> None:
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
    """Record finished markers of committed groups (on this thread, which owns the position store), then give
    their leases back."""
    results = []
    while pending and (wait or pending[0][1].done()):
        staged, future = pending.pop(0)
        try:
            result = future.result()  # a failed commit raises here: its splits stay unfinished
        except CdcError:
            raise
        except Exception as exc:
            raise _failed(rt, staged.splits, staged.marks, staged.reads, exc, "in the target's commit") from None
        crash_point("snapshot.after_commit")  # committed in the target, not yet finished for other resumers
        rt.resumer.record_committed(staged.finished)
        locks.release([s.id for s in staged.splits])
        seconds = time.monotonic() - staged.started
        total = sum(result.rows_by_split.values()) or 1
        low, high = staged.marks[0].low, staged.marks[0].high
        for s in staged.splits:
            rows = result.rows_by_split.get(s.index, 0)
            results.append(SplitResult(s.id, rows, result.staged_bytes * rows // total, str(low), str(high), seconds))
    return results


def _skipped(record) -> SplitResult:
    d = record.position_data
    return SplitResult(record.position_key, int(d.get("rows", 0)), 0, _text(d["low_watermark"]),
                       _text(d["high_watermark"]), 0.0, skipped=True)


def _text(position_json: dict) -> str:
    return str(position_from_json(position_json))


def _call(hook, ids: list[str]) -> None:
    if hook is not None:
        hook(ids)
