"""Before verifying: is a sync applying the log, so that the checkpoint can reach the positions the splits are
compared at? Decided once per command, up front, instead of each split waiting for a checkpoint that never moves.

    no checkpoint                          -> blocked: the log phase never ran
    the task's lease free (no sync)        -> go only if the checkpoint already is at the source's log end (nothing
                                              left to apply; each split then waits 0 s), else blocked
    a sync holds the lease                 -> wait, at most once, for the checkpoint to reach the log end as read
                                              now; blocked if it did not (behind, or stuck)
    the lease held by something else       -> blocked (a reset or a savepoint rollback moves the checkpoint)
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from cdc_assets.core.positions import Position, is_before
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.task_lock import lease_holder

POLL_SECS = 0.2
START_SYNC = ("start `cdc-assets sync` (or turn on the task's incremental sensor in Dagster) and verify again once "
              "it has caught up")


@dataclass(frozen=True)
class SyncState:
    blocked: str  # why no split can be compared now, with the way out; "" when verification can go on
    split_wait: float  # how long each split waits for the checkpoint


def sync_state(rt: TaskRuntime, wait_secs: float) -> SyncState:
    checkpoint = rt.resumer.checkpoint()
    if checkpoint is None:
        return SyncState(f"the log phase of task {rt.config.task_id} has not started (no checkpoint): {START_SYNC}",
                         0.0)
    log_end = rt.source.current_position()
    holder = lease_holder(rt.config)
    if holder is None:
        if not is_before(checkpoint.position, log_end):
            return SyncState("", 0.0)
        return SyncState(f"no sync is running for task {rt.config.task_id} (nothing holds its lease) and its "
                         f"checkpoint {checkpoint.position} is behind the source's log end {log_end}: {START_SYNC}",
                         0.0)
    if not holder.startswith("sync"):
        return SyncState(f"{holder} holds the checkpoint of task {rt.config.task_id}: verify again after it ended",
                         0.0)
    reached, at = wait_for(rt, log_end, wait_secs)
    if reached:
        return SyncState("", wait_secs)
    moved = "moving" if at != checkpoint.position else "not moving"
    return SyncState(f"the sync ({holder}) did not catch up within {wait_secs:.0f} s: its checkpoint is at {at} "
                     f"({moved}), the source's log end was {log_end}: verify again when its lag is small, or with "
                     "a longer --wait", 0.0)


def wait_for(rt: TaskRuntime, position: Position, wait_secs: float) -> tuple[bool, Position | None]:
    """Until the checkpoint is at or past `position`, at most `wait_secs`: whether it got there, and where it is."""
    deadline = time.monotonic() + wait_secs
    while True:
        checkpoint = rt.resumer.checkpoint()
        at = checkpoint.position if checkpoint is not None else None
        if at is not None and not is_before(at, position):
            return True, at
        if time.monotonic() >= deadline:
            return False, at
        time.sleep(POLL_SECS)
