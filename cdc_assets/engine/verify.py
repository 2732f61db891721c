"""Verification: does each split's key range hold the same rows in the target as in the source?

Under a steady writer a naive comparison races the log: the source has rows the target gets a moment later.
So each split is compared *at one log position*, without stopping the log phase:

    1. wait until the checkpoint reached the source's log end (a sync is running and keeping up; no lock yet)
    2. hold the split's range still on the source (`SnapshotSource.hold_split`; sources/split_hold.py), reading its rows under the hold
    3. P = the source's log position, read under the hold: the range's rows at every position from P to the
       log end are the rows read in 2 (nothing can change them while the hold lasts)
    4. wait until the checkpoint reached P: the target holds every change up to P and, since the log holds no
       change of the range after P yet, none after it
    5. read the range in the target (`Sink.range_rows`) and compare row digests (core/row_digest.py); release the hold

Writers of the range (PostgreSQL: of the table) wait from 2 to 5: about one checkpoint interval of the running
sync. A check that cannot reach step 5 (no sync running, checkpoint not moving, table not in the log phase yet)
is *inconclusive*, never a mismatch. The result is recorded (`SplitVerify` records in the position store); a
split that failed is read again by its next materialization (engine/repair.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from cdc_assets.core.positions import Position, is_before
from cdc_assets.core.row_digest import SplitDiff, compare, digest, key_text
from cdc_assets.core.splits import Split, SplitPlan
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.engine.planning import describe
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import PlanError
from cdc_assets.resumer.records import SPLIT_VERIFY, PositionRecord, now_text

WAIT_SECS = 120.0  # default wait for the checkpoint, at each of steps 1 and 4
POLL_SECS = 0.2

PASSED, FAILED, INCONCLUSIVE = "passed", "failed", "inconclusive"


@dataclass(frozen=True)
class SplitCheck:
    split_id: str
    status: str  # passed | failed | inconclusive
    detail: str
    source_rows: int = 0
    target_rows: int = 0
    position: str = ""  # the log position both sides were compared at
    seconds: float = 0.0
    held_secs: float = 0.0  # how long the source range was held

    def line(self) -> str:
        at = f" at {self.position}" if self.position else ""
        return f"{self.split_id}: {self.status.upper()}{at}: {self.detail} ({self.seconds:.1f} s, held {self.held_secs:.2f} s)"


def verify_table(rt: TaskRuntime, table: TableId, split_ids: list[str] | None = None,
                 wait_secs: float = WAIT_SECS) -> list[SplitCheck]:
    """Verify the given splits of `table` (default: every split) one after the other, recording each result."""
    rt.one_target("verification")
    plan = rt.plans.load(table)
    if plan is None:
        raise PlanError(f"{table} has no split plan", "run `cdc-assets plan` and `cdc-assets snapshot` first")
    schema = describe(rt, table)
    splits = [plan.split(s) for s in split_ids] if split_ids else plan.splits
    checks = [_verify_split(rt, plan, schema, s, wait_secs) for s in splits]
    _record(rt, checks)
    return checks


def _verify_split(rt: TaskRuntime, plan: SplitPlan, schema: TableSchema, split: Split, wait_secs: float) -> SplitCheck:
    started = time.monotonic()

    def result(status: str, detail: str, **more) -> SplitCheck:
        return SplitCheck(split.id, status, detail, seconds=time.monotonic() - started, **more)

    finished = rt.resumer.finished([split.id])
    if split.id not in finished:
        return result(INCONCLUSIVE, "not snapshotted yet: materialize the split first")
    why = _not_applied(rt, schema.table)
    if why:
        return result(INCONCLUSIVE, why)
    if not _wait_for(rt, rt.source.current_position(), wait_secs):
        return result(INCONCLUSIVE, f"the checkpoint did not reach the source's log end within {wait_secs:.0f} s: "
                      "run `cdc-assets sync` (or let the incremental sensor launch its runs) and verify again")
    kinds = [c.kind for c in schema.columns]
    key_at = [i for k in schema.primary_key for i, c in enumerate(schema.columns) if c.name == k]
    keys = [kinds[i] for i in key_at]
    with rt.source.hold_split(schema, split.range, plan.key_kind, rt.sink.target_format()) as held:
        held_at = time.monotonic()
        position = rt.source.current_position()
        source = {key_text([r[i] for i in key_at], keys): digest(r, kinds) for r in held.rows}
        if not _wait_for(rt, position, wait_secs):
            return result(INCONCLUSIVE, f"the checkpoint did not reach {position} within {wait_secs:.0f} s",
                          held_secs=time.monotonic() - held_at)
        target_rows = rt.sink.range_rows(schema, split.range, plan.key_kind, rt.config.source.db_type,
                                         [tuple(r[i] for i in key_at) for r in held.rows])
        held_secs = time.monotonic() - held_at
    target = {key_text([r[i] for i in key_at], keys): digest(r, kinds) for r in target_rows}
    raw_keys = {key_text([r[i] for i in key_at], keys): tuple(r[i] for i in key_at) for r in target_rows}
    diff = _settle_foreign_keys(rt, schema, plan, compare(source, target), raw_keys)
    return result(PASSED if diff.equal else FAILED, diff.summary() if diff.equal else
                  f"{diff.summary()}; materialize partition {split.id} to read it again (repair)",
                  source_rows=diff.source_rows, target_rows=diff.target_rows, position=str(position),
                  held_secs=held_secs)


def _not_applied(rt: TaskRuntime, table: TableId) -> str:
    # Not waited for: the checks also run with the first snapshot's materializations, long before any sync.
    checkpoint = rt.resumer.checkpoint()
    if checkpoint is None:
        return "the log phase has not started (no checkpoint): run `cdc-assets sync`, then verify"
    schemas = rt.resumer.schemas(checkpoint.schema_version) or {}
    if table not in schemas:
        return f"{table} is not applied by the log phase yet (it waits for its snapshot)"
    return ""


def _wait_for(rt: TaskRuntime, position: Position, wait_secs: float) -> bool:
    """Until the checkpoint is at or past `position`, at most `wait_secs`."""
    deadline = time.monotonic() + wait_secs
    while True:
        checkpoint = rt.resumer.checkpoint()
        if checkpoint is not None and not is_before(checkpoint.position, position):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECS)


def _settle_foreign_keys(rt: TaskRuntime, schema: TableSchema, plan: SplitPlan, diff: SplitDiff,
                         raw_keys: dict[str, tuple]) -> SplitDiff:
    """Where the target may order keys differently, a key it puts in this range may be in another split on the
    source: extra only if the source lacks it altogether."""
    if not diff.extra or rt.sink.check_key_order(plan.key_kind, rt.config.source.db_type):
        return diff
    candidates = [raw_keys[k] for k in diff.extra]
    present = rt.source.present_keys(schema, candidates)
    extra = [k for k, c in zip(diff.extra, candidates) if c not in present]
    return SplitDiff(diff.source_rows, diff.target_rows - (len(diff.extra) - len(extra)), diff.missing, extra,
                     diff.changed)


def _record(rt: TaskRuntime, checks: list[SplitCheck]) -> None:
    """The last conclusive result per split, and the finished marker it was made against: a repair re-reads the
    split only while that marker stands (engine/repair.py). An inconclusive check leaves a failure standing."""
    checks = [c for c in checks if c.status != INCONCLUSIVE]
    if not checks:
        return
    finished = rt.resumer.finished([c.split_id for c in checks])
    records = [PositionRecord(rt.config.task_id, SPLIT_VERIFY, c.split_id, {
        "type": SPLIT_VERIFY, "status": c.status, "detail": c.detail, "position": c.position,
        "source_rows": c.source_rows, "target_rows": c.target_rows, "checked_at": now_text(),
        "high_watermark": finished[c.split_id].position_data.get("high_watermark") if c.split_id in finished else None,
    }) for c in checks]
    rt.resumer.record(records)


def last_results(rt: TaskRuntime, split_ids: list[str]) -> dict[str, PositionRecord]:
    return {r.position_key: r for r in rt.resumer.store.load(rt.config.task_id, SPLIT_VERIFY, split_ids)}
