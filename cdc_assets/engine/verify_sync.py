"""Before verifying: is a sync applying the log, so that the checkpoint can reach the positions the splits are
compared at? Decided once per command, up front, instead of each split waiting for a checkpoint that never moves.

A sync shows in two ways: it holds the task's lease while it runs (engine/task_lock.py), and it writes the
checkpoint. The Dagster sensor runs it as bounded runs, so between two runs nothing holds the lease while the
checkpoint was written moments ago.

    no checkpoint                                     -> blocked: the log phase never ran
    the lease held by a command other than sync       -> blocked (a reset or a savepoint rollback moves it)
    the checkpoint at the source's log end            -> go
    behind; no lease, checkpoint older than STALE_SECS -> blocked at once: no sync is running
    behind; a sync holds the lease or wrote recently  -> wait, once, for the checkpoint to reach the log end as
                                                         read now; blocked if it did not
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone

from cdc_assets.core.positions import Position, is_before
from cdc_assets.core.tables import TableSchema
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.task_lock import lease_holder
from cdc_assets.resumer.records import CDC_DOING, CHECKPOINT_KEY

POLL_SECS = 0.05  # a read of the position store; a lock-free split waits for the checkpoint once per round
STALE_SECS = 120.0  # the sensor launches a run within ~15 s of the log moving ahead, plus the run's start
KEEP_SYNCING = "run `cdc-assets sync` (or let the incremental sensor launch its runs) and verify again"
START_SYNC = ("start `cdc-assets sync` (or turn on the task's incremental sensor in Dagster) and verify again once "
              "it has caught up")


@dataclass(frozen=True)
class SyncState:
    blocked: str  # why no split can be compared now, with the way out; "" when verification can go on
    split_wait: float  # how long each split waits for the checkpoint


def sync_state(rt: TaskRuntime, wait_secs: float) -> SyncState:
    task = rt.config.task_id
    checkpoint = rt.resumer.checkpoint()
    if checkpoint is None:
        return SyncState(f"the log phase of task {task} has not started (no checkpoint): {START_SYNC}", 0.0)
    holder = lease_holder(rt.config)
    if holder is not None and not holder.startswith("sync"):
        return SyncState(f"{holder} holds the checkpoint of task {task}: verify again after it ended", 0.0)
    ago = written_ago(rt)
    syncing = holder is not None or (ago is not None and ago <= STALE_SECS)
    log_end = rt.source.current_position()
    if not is_before(checkpoint.position, log_end):
        return SyncState("", wait_secs if syncing else 0.0)  # stopped and caught up: nothing left to wait for
    last = f"last written {ago:.0f} s ago" if ago is not None else "never written"
    if not syncing:
        return SyncState(f"no sync is running for task {task}: nothing holds its lease, and its checkpoint ({last}) "
                         f"is behind the source's log end ({checkpoint.position} < {log_end}): {START_SYNC}", 0.0)
    reached, at = wait_for(rt, log_end, wait_secs)
    if reached:
        return SyncState("", wait_secs)
    moved = "moving" if at != checkpoint.position else "not moving"
    if holder is None:
        return SyncState(f"no sync is running for task {task}: nothing holds its lease, and its checkpoint ({last}, "
                         f"{moved}) did not reach the source's log end within {wait_secs:.0f} s ({at} < {log_end}): "
                         f"{START_SYNC}", 0.0)
    return SyncState(f"the sync ({holder}) did not catch up within {wait_secs:.0f} s: its checkpoint is at {at} "
                     f"({moved}), the source's log end was {log_end}: verify again when its lag is small, or with "
                     "a longer --wait", 0.0)


def written_ago(rt: TaskRuntime) -> float | None:
    """Seconds since the checkpoint was last written (the stores keep UTC wall-clock times), None if unknown."""
    [record] = rt.resumer.store.load(rt.position_key, CDC_DOING, [CHECKPOINT_KEY]) or [None]
    if record is None:
        return None
    try:
        at = datetime.fromisoformat(str(record.updated_at)).replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return max(0.0, (datetime.now(timezone.utc) - at).total_seconds())


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


def columns_not_applied(rt: TaskRuntime, schema: TableSchema) -> str:
    """Why the split cannot be compared when the source has columns the log phase does not apply yet, once the
    checkpoint reached the log end; or "". PostgreSQL's log carries a schema change only in the Relation message
    sent before the table's next row change: until then the target holds the table as before (a renamed column
    under its old name, an added one not there yet), which no comparison of the source's columns can judge."""
    checkpoint = rt.resumer.checkpoint()
    applied = (rt.resumer.schemas(checkpoint.schema_version) or {}).get(schema.table) if checkpoint else None
    if applied is None:
        return ""
    have = {c.name for c in applied.columns}
    unmet = [c.name for c in schema.columns if c.name not in have]
    if not unmet:
        return ""
    return (f"{schema.table} has columns the log phase does not apply yet ({', '.join(unmet)}): it meets the "
            "schema change with the table's next row change in the source's log; verify after it")
