"""Reset: move a task's checkpoint to the source's log end (`latest`), the oldest position the source still keeps
(`earliest`) or a given position, with a record of who moved it from where to where and a warning of what that
skips (never applied to the target) or replays (applied a second time).

A reset moves an existing checkpoint; where a task *starts* without one stays `pipeline.startup_mode`'s (seeding),
so a task without a checkpoint is refused. The record (`CdcReset`, keyed by its time) and the new checkpoint are
written in one transaction of the position store (with `from_target`, of the target): a crash leaves the old
checkpoint or the new one, never a third, and the record exists exactly when the new checkpoint does. The log is
not touched (no slot is advanced), so a crash before the commit loses nothing the old checkpoint needs.

With several targets, each target's checkpoint is moved to the same position, target after target, each in its
own position store (`reset_targets`): a crash between two leaves the ones done at the new position and the others
at their old one, each consistent with its target; running the same reset again finishes it (a `position` or
`earliest` reset moves the done ones nowhere).

A running sync of the same task would write its own checkpoint over the reset: stop it first. The Dagster reset
job carries the incremental job's run-queue tag, so the queue never runs it beside an incremental run.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from cdc_assets.core.positions import POSITION_FORMS, Position, is_before
from cdc_assets.engine.faults import crash_point
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.task_lock import task_lease
from cdc_assets.engine.target_transaction import TargetTransaction
from cdc_assets.errors import CdcError, ConfigError, PlanError, PositionLost
from cdc_assets.resumer.records import CDC_RESET, PositionRecord, now_text
from cdc_assets.resumer.resumer import Checkpoint

log = logging.getLogger("cdc_assets.reset")
ResetTo = Literal["latest", "earliest", "position"]


@dataclass(frozen=True)
class ResetResult:
    task_id: str  # whose checkpoint: the task's, `<task>.<target>` for a target after the first
    to: ResetTo
    before: Position
    after: Position
    by: str
    at: str
    effect: Literal["skips", "replays", "none"]
    log_bytes: int | None  # log between the two positions; None when the source cannot tell (another server)
    warning: str
    record: PositionRecord

    def lines(self) -> list[str]:
        return [f"checkpoint of task {self.task_id} reset to {self.to}: {self.before} -> {self.after}",
                f"recorded as {CDC_RESET} / {self.record.position_key} (by {self.by})", f"warning: {self.warning}"]


def reset_checkpoint(rt: TaskRuntime, to: ResetTo, by: str, position: Position | None = None) -> ResetResult:
    """Move the checkpoint of a task with one target; see the module docstring."""
    rt.one_target("a reset")
    [result] = reset_targets(rt, to, by, position)
    return result


def reset_targets(rt: TaskRuntime, to: ResetTo, by: str, position: Position | None = None,
                  targets: list[str] | None = None) -> list[ResetResult]:
    """Move the checkpoint of each target named (default every one) to one position; see the module docstring.
    Raises PositionLost for a position the log no longer has."""
    lanes = rt.lanes_named(targets)
    with task_lease(rt.config, "reset", owner=rt.task):
        checkpoints = [_checkpoint(lane) for lane in lanes]  # each must have one before any moves
        after = _target(rt, to, position)
        return [_reset(lane, checkpoint, to, by, after) for lane, checkpoint in zip(lanes, checkpoints)]


def _checkpoint(rt: TaskRuntime) -> Checkpoint:
    checkpoint = rt.resumer.checkpoint()
    if checkpoint is None:
        raise PlanError(f"task {rt.position_key} has no checkpoint yet: its log phase has not started, there is "
                        "nothing to reset",
                        "where a task starts is pipeline.startup_mode's (initial | latest | earliest | timestamp | "
                        "position, used only without a checkpoint); run its first sync, then reset")
    return checkpoint


def _reset(rt: TaskRuntime, checkpoint: Checkpoint, to: ResetTo, by: str, after: Position) -> ResetResult:
    task_id, resumer = rt.position_key, rt.resumer
    before = checkpoint.position
    effect, log_bytes, warning = _effect(rt, before, after)
    at = now_text()
    record = PositionRecord(task_id, CDC_RESET, at.replace(" ", "T"), {
        "type": CDC_RESET, "to": to, "by": by, "at": at, "from": before.to_json(), "to_position": after.to_json(),
        "effect": effect, "log_bytes": log_bytes, "warning": warning})
    # Tables ahead are dropped: from the new position every table reads the same log (a replay re-applies what a
    # table applied already, which the upsert makes harmless; a skip passes their positions anyway).
    moved = Checkpoint(after, checkpoint.schema_version, checkpoint.events)
    _write(rt, [record, *resumer.checkpoint_records(moved)])
    log.warning("task %s: checkpoint reset to %s (%s -> %s) by %s: %s", task_id, to, before, after, by, warning)
    return ResetResult(task_id, to, before, after, by, at, effect, log_bytes, warning, record)


def _target(rt: TaskRuntime, to: ResetTo, position: Position | None) -> Position:
    if to == "latest":
        return rt.source.current_position()
    oldest = rt.log.earliest()
    if to == "earliest":
        return oldest
    if position is None:
        raise ConfigError("reset --to position needs the position", f"give it as {POSITION_FORMS}")
    if is_before(position, oldest):
        raise PositionLost(
            f"task {rt.config.task_id}: position {position} is no longer in the source's log, which starts at "
            f"{oldest} (binlog files purged, or the replication slot confirmed past it)",
            "reset --to earliest replays from the oldest position the source keeps; to get the changes before it, "
            "re-plan and re-snapshot: cdc-assets plan --replan")
    end = rt.source.current_position()
    if is_before(end, position):
        raise CdcError(f"task {rt.config.task_id}: position {position} is past the source's log end {end}",
                       "give a position the source has written (position.log, SHOW MASTER STATUS, "
                       "pg_current_wal_lsn()), or reset --to latest")
    return position


def _effect(rt: TaskRuntime, before: Position, after: Position) -> tuple[str, int | None, str]:
    if is_before(after, before):
        size = rt.log.distance(after, before)
        return "replays", size, (
            f"the changes from {after} to {before}{_bytes(size)} are applied to the target again: rows they "
            "changed go through their old values again and end as the source has them now; with "
            "pipeline.exactly_once they are applied a second time. DDL on a captured table in that stretch stops "
            "the sync under schema_change_policy halt")
    if is_before(before, after):
        size = rt.log.distance(before, after)
        return "skips", size, (
            f"the changes from {before} to {after}{_bytes(size)} are never applied to the target: rows they "
            "changed keep their old values there until changed again; to repair them re-snapshot "
            "(cdc-assets plan --replan)")
    return "none", 0, f"the checkpoint is at {after} already: nothing is skipped or replayed"


def _bytes(size: int | None) -> str:
    return "" if size is None else f" ({size:,} bytes of log)"


def _write(rt: TaskRuntime, records: list[PositionRecord]) -> None:
    """The reset record and the checkpoint in one transaction of the position store; then position.log."""
    resumer = rt.resumer
    crash_point("reset.before_write")
    if resumer.writes_in_target:
        target = TargetTransaction(rt.sink)
        try:
            resumer.write_in(target.cursor, records[:1])
            crash_point("reset.record_written")
            resumer.write_in(target.cursor, records[1:])
        except BaseException:
            target.rollback()
            raise
        target.commit()
        crash_point("reset.committed")
        resumer.record_committed(records)  # position.log
    else:
        resumer.record_committed(records)  # the store in one transaction, then position.log
        crash_point("reset.committed")
