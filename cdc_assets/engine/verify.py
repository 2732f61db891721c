"""Verification: does each split's key range hold the same rows in the target as in the source?

Under a steady writer a naive comparison races the log: the source has rows the target gets a moment later.
By default each split is compared in lock-free rounds that judge only keys no write touched around them
(engine/verify_window.py). With `hold`, each split is compared *at one log position* instead:

    1. wait until the checkpoint reached the source's log end (a sync is running and keeping up; no lock yet)
    2. hold the split's range still on the source (`SnapshotSource.hold_split`; sources/split_hold.py), reading its rows under the hold
    3. P = the source's log position, read under the hold: the range's rows at every position from P to the
       log end are the rows read in 2 (nothing can change them while the hold lasts)
    4. wait until the checkpoint reached P: the target holds every change up to P and, since the log holds no
       change of the range after P yet, none after it
    5. read the range in the target (`Sink.range_rows`) and compare row digests (core/row_digest.py); release the hold

Writers of the range (PostgreSQL: of the table) wait from 2 to 5: about one checkpoint interval of the running
sync. Whether a sync runs is decided once, before any split (engine/verify_sync.py); the hold is taken again when
the source's writers refuse it (a deadlock, its short lock wait ran out: engine/verify_hold.py). A check that
cannot reach step 5 (no sync running, checkpoint not moving, table not in the log phase yet, the source too busy)
is *inconclusive*, never a mismatch. The result is recorded (`SplitVerify` records in the position store); a
split that failed is read again by its next materialization (engine/repair.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from cdc_assets.core.row_digest import SplitDiff, compare, digest, key_text
from cdc_assets.core.splits import Split, SplitPlan
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.engine.planning import carried_now
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.verify_hold import HOLD_WAIT_SECS, Refusals, held
from cdc_assets.engine.verify_sync import KEEP_SYNCING, SyncState, columns_not_applied, sync_state, wait_for
from cdc_assets.engine.verify_window import compare_split
from cdc_assets.errors import PlanError, SourceBusy
from cdc_assets.resumer.records import SPLIT_VERIFY, PositionRecord, now_text

WAIT_SECS = 120.0  # default wait for the checkpoint, at each of steps 1 and 4

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
    retries: int = 0  # holds the source refused (deadlock, lock wait timeout) before one was granted or we gave up
    refusals: str = ""  # e.g. "2 deadlocks, 1 lock wait timeout"
    target: str = ""  # the target's name, on a task with several
    rounds: int = 0  # lock-free rounds read (engine/verify_window.py)
    rechecked: int = 0  # keys a later round judged again: they changed around the first read, or differed in it

    def line(self) -> str:
        at = f" at {self.position}" if self.position else ""
        busy = f", source busy: {self.retries} retries ({self.refusals})" if self.retries else ""
        how = (f"{self.rounds} lock-free rounds, {self.rechecked} keys rechecked" if self.rounds
               else f"held {self.held_secs:.2f} s")
        where = f" in {self.target}" if self.target else ""
        return (f"{self.split_id}{where}: {self.status.upper()}{at}: {self.detail} ({self.seconds:.1f} s, "
                f"{how}{busy})")


def verify_table(rt: TaskRuntime, table: TableId, split_ids: list[str] | None = None,
                 wait_secs: float = WAIT_SECS, state: SyncState | None = None, hold: bool = False) -> list[SplitCheck]:
    """Verify the given splits of `table` (default: every split) one after the other in the target of `rt` (with
    several targets, each lane of `rt.lanes` is verified on its own), recording each result.
    `state`: the sync's state as the caller decided it for several tables (default: decided here). `hold`: compare
    under a hold of each range on the source (writers wait) instead of lock-free rounds."""
    plan = rt.plans.load(table)
    if plan is None:
        raise PlanError(f"{table} has no split plan", "run `cdc-assets plan` and `cdc-assets snapshot` first")
    splits = [plan.split(s) for s in split_ids] if split_ids else plan.splits
    state = state or sync_state(rt, wait_secs)
    if state.blocked:
        return [SplitCheck(s.id, INCONCLUSIVE, state.blocked, target=_target(rt)) for s in splits]
    schema = carried_now(rt, table)
    checks = []
    for split in splits:
        checks.append(_verify_split(rt, plan, schema, split, state.split_wait, hold))
        _pace(rt.config.verify.rows_per_second, checks[-1])
    _record(rt, checks)
    return checks


def _verify_split(rt: TaskRuntime, plan: SplitPlan, schema: TableSchema, split: Split, wait_secs: float,
                  hold: bool) -> SplitCheck:
    started = time.monotonic()
    refusals = Refusals()

    def result(status: str, detail: str, **more) -> SplitCheck:
        return SplitCheck(split.id, status, detail, seconds=time.monotonic() - started, retries=len(refusals),
                          refusals=str(refusals), target=_target(rt), **more)

    finished = rt.resumer.finished([split.id])
    if split.id not in finished:
        return result(INCONCLUSIVE, "not snapshotted yet: materialize the split first")
    why = _not_applied(rt, schema.table)
    if why:
        return result(INCONCLUSIVE, why)
    if not hold:  # the first round waits for the checkpoint, then asks `columns_not_applied`
        return _verify_window(rt, plan, schema, split, wait_secs, result)
    if not wait_for(rt, rt.source.current_position(), wait_secs)[0]:
        return result(INCONCLUSIVE, f"the checkpoint did not reach the source's log end within {wait_secs:.0f} s: "
                      f"{KEEP_SYNCING}")
    unmet = columns_not_applied(rt, schema)
    if unmet:
        return result(INCONCLUSIVE, unmet)
    kinds = [c.kind for c in schema.columns]
    key_at = [i for k in schema.primary_key for i, c in enumerate(schema.columns) if c.name == k]
    keys = [kinds[i] for i in key_at]
    try:
        with held(rt, schema, plan, split, refusals) as hold:
            held_at = time.monotonic()
            position = rt.source.current_position()
            source = {key_text([r[i] for i in key_at], keys): digest(r, kinds) for r in hold.rows}
            if not wait_for(rt, position, wait_secs)[0]:
                return result(INCONCLUSIVE, f"the checkpoint did not reach {position} within {wait_secs:.0f} s",
                              held_secs=time.monotonic() - held_at)
            target_rows = rt.sink.range_rows(schema, split.range, plan.key_kind, rt.config.source.db_type,
                                             [tuple(r[i] for i in key_at) for r in hold.rows])
            held_secs = time.monotonic() - held_at
    except SourceBusy:
        return result(INCONCLUSIVE, f"the source was busy: its writers refused the hold of this range "
                      f"{len(refusals)} times ({refusals}; each try waits {HOLD_WAIT_SECS:.0f} s at most): verify "
                      "again when fewer transactions write the table")
    target = {key_text([r[i] for i in key_at], keys): digest(r, kinds) for r in target_rows}
    raw_keys = {key_text([r[i] for i in key_at], keys): tuple(r[i] for i in key_at) for r in target_rows}
    diff = _settle_foreign_keys(rt, schema, plan, compare(source, target), raw_keys)
    return result(PASSED if diff.equal else FAILED, diff.summary() if diff.equal else
                  f"{diff.summary()}; materialize partition {split.id} to read it again (repair)",
                  source_rows=diff.source_rows, target_rows=diff.target_rows, position=str(position),
                  held_secs=held_secs)


def _verify_window(rt: TaskRuntime, plan: SplitPlan, schema: TableSchema, split: Split, wait_secs: float,
                   result) -> SplitCheck:
    window = compare_split(rt, plan, schema, split, wait_secs)
    rounds = window.rounds
    if window.blocked:
        return result(INCONCLUSIVE, window.blocked, rounds=rounds.rounds)
    diff = _settle_foreign_keys(rt, schema, plan, rounds.diff(), window.target_keys or {})
    counts = dict(source_rows=diff.source_rows, target_rows=diff.target_rows, position=window.position,
                  rounds=rounds.rounds, rechecked=rounds.rechecked)
    if not diff.equal:
        return result(FAILED, f"{diff.summary()}; materialize partition {split.id} to read it again (repair)",
                      **counts)
    if rounds.unsettled:
        return result(INCONCLUSIVE, f"{len(rounds.unsettled)} keys changed in each of {rounds.rounds} rounds "
                      f"(unsettled: {'; '.join(sorted(rounds.unsettled)[:5])}); the others are equal: verify "
                      "again when the writers moved on", **counts)
    return result(PASSED, diff.summary(), **counts)


def _target(rt: TaskRuntime) -> str:
    return rt.name if len(rt.config.targets) > 1 else ""


def _pace(rows_per_second: int, check: SplitCheck) -> None:
    """`verify.rows_per_second`: after a split, the rest of the time its rows (the larger side) may take."""
    if rows_per_second > 0:
        time.sleep(max(0.0, max(check.source_rows, check.target_rows) / rows_per_second - check.seconds))


def _not_applied(rt: TaskRuntime, table: TableId) -> str:
    # Not waited for: the checks also run with the first snapshot's materializations, long before any sync.
    checkpoint = rt.resumer.checkpoint()
    if checkpoint is None:
        return "the log phase has not started (no checkpoint): run `cdc-assets sync`, then verify"
    schemas = rt.resumer.schemas(checkpoint.schema_version) or {}
    if table not in schemas:
        return f"{table} is not applied by the log phase yet (it waits for its snapshot)"
    return ""


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
    records = [PositionRecord(rt.position_key, SPLIT_VERIFY, c.split_id, {
        "type": SPLIT_VERIFY, "status": c.status, "detail": c.detail, "position": c.position,
        "source_rows": c.source_rows, "target_rows": c.target_rows, "checked_at": now_text(),
        "high_watermark": finished[c.split_id].position_data.get("high_watermark") if c.split_id in finished else None,
    }) for c in checks]
    rt.resumer.record(records)


def summary_lines(checks: list[SplitCheck]) -> list[str]:
    """One line per split, except that splits inconclusive for one and the same reason (no sync running, decided
    before any split) share one line: the reason is said once."""
    lines: list[str] = []
    shared: dict[tuple[str, str], list[str]] = {}
    for check in checks:
        if check.status == INCONCLUSIVE and not check.retries:
            shared.setdefault((check.detail, check.target), []).append(check.split_id)
        else:
            lines.append(check.line())
    for (detail, target), ids in shared.items():
        named = ids[0] if len(ids) == 1 else f"{ids[0]} .. {ids[-1]} ({len(ids)} splits)"
        lines.append(f"{named}{f' in {target}' if target else ''}: INCONCLUSIVE: {detail}")
    return lines


def last_results(rt: TaskRuntime, split_ids: list[str]) -> dict[str, PositionRecord]:
    return {r.position_key: r for r in rt.resumer.store.load(rt.position_key, SPLIT_VERIFY, split_ids)}
