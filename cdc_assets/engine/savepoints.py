"""Savepoints: a named tag of the target tables' state and the task's positions, and the rollback to it, on every
target of a task or on the ones named.

A savepoint is one row in a target (`cdc_assets_meta.savepoints`), committed in one target transaction: that
target's checkpoint record as it stands, its schema version, the plan ids, its finished splits, and an *epoch*.
Nothing is copied: from then on every log batch writes, in its own target transaction and before it changes
anything, the before-images of the keys it touches (sinks/before_images.py, engine/image_writer.py). Rolling back
puts each imaged key back as its oldest image since the savepoint and writes the savepoint's checkpoint, in one
target transaction; a `sync` then replays the log from there. The log must still reach that position: a MySQL
binlog is checked against the oldest file; a PostgreSQL savepoint holds a slot of its own
(sources/postgres/savepoint_slots.py). Where positions live outside the target, a rollback killed between its
commit and the position write is finished by `recover` (engine/target_savepoints.py), which every savepoint
command runs first on each target it touches and every sync on each lane before reading its checkpoint.

**Several targets.** Each target has its own savepoints, keyed by its lane's `position_key` (engine/
target_savepoints.py): a command works target after target (`targets`: the names, default every one), all under
one hold of the task's lease, and returns one report per target.

- `create_on` checks every target first (each needs a checkpoint; a target that has the name already must have
  it at the state it is in now), then creates it target after target. Killed between two, the same command run
  again finishes it: a target that has the name at its current state keeps it ("kept"), the others get it. A
  target holding the name for an *earlier* state refuses the whole command before any target changes, with the
  way out (delete it there, or pick another name): creating it on the rest would give one name to states of
  different times, and a rollback of "every target" to it would silently put one target further back.
- `rollback_on` refuses up front, before touching any target, when any target refuses: no savepoint of that
  name there, the plan or the schema version changed, the log no longer reaches it. Then target after target,
  each in its own target transaction. Killed between two, the targets done are at the savepoint and the others
  as they were, each consistent with its checkpoint; the same rollback again finishes it (going back to the
  savepoint again is harmless on a target that is there: no images since, the same checkpoint).
- `delete_on` deletes it where it exists; run again after a kill, the targets done say so. It refuses only
  when no target named has it.

Rolling back one target moves the task's shared PostgreSQL slot back to that target's savepoint (never forward:
the slot is only replaced when it is ahead of the savepoint's). That is safe for the other targets: a session
reads from the earliest lane's checkpoint (engine/incremental.py) and every lane leaves out what is at or before
its own checkpoint (core/skip_filter.py `SkipFilter.behind` / `applied_before`), so the others apply nothing twice.

The *task lease* (an flock on a file in the task's data_dir: engine/task_lock.py) keeps syncs and savepoint
commands of one task apart: a savepoint taken while a batch commits, or a rollback under a running sync, would
tag or restore a state no checkpoint describes. It is re-entrant per owner, the lanes' shared `Task`, so a
command holds it once for all its targets.
"""
from __future__ import annotations

from cdc_assets.engine import target_savepoints as lane_ops
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.savepoint_values import SavepointError, SavepointReport, check_name
from cdc_assets.engine.task_lock import task_lease as lease

LEASE_WAIT_SECS = 600.0  # a sync's runs are bounded; a rollback takes seconds


def task_lease(rt: TaskRuntime, wait: float = LEASE_WAIT_SECS, doing: str = "this command"):
    """Syncs and savepoint commands of one task run one at a time (engine/task_lock.py); held by the task's
    runtime, whichever lane asks."""
    return lease(rt.config, doing, owner=rt.task, wait=wait)


def _recovered(rt: TaskRuntime, targets: list[str] | None) -> list[TaskRuntime]:
    """The lanes named, each with what a killed rollback left on it finished first."""
    lanes = rt.lanes_named(targets)
    for lane in lanes:
        lane_ops.recover(lane)
    return lanes


def create_on(rt: TaskRuntime, name: str, targets: list[str] | None = None) -> list[SavepointReport]:
    """Tag each target's tables and checkpoint as savepoint `name` (every target, or those named): no table is
    copied. Every target is checked before any is tagged."""
    check_name(name)
    with task_lease(rt, doing=f"savepoint create {name}"):
        lanes = _recovered(rt, targets)
        for lane in lanes:
            lane_ops.create_check(lane, name)
        return [lane_ops.create(lane, name) for lane in lanes]


def rollback_on(rt: TaskRuntime, name: str, targets: list[str] | None = None) -> list[SavepointReport]:
    """Restore each target's tables and checkpoint to savepoint `name` (every target, or those named), target
    after target; refused before any target is touched when one of them cannot go back to it."""
    with task_lease(rt, doing=f"savepoint rollback {name}"):
        lanes = _recovered(rt, targets)
        found, why, missing = [], [], []
        for lane in lanes:
            try:
                sp, every = lane_ops.find(lane, name)
            except SavepointError as exc:
                why.append(exc.message)
                missing.append(lane.name)
                continue
            found.append((lane, sp, every))
            why += [f"{lane.name}: {reason}" if len(rt.lanes) > 1 else reason for reason in lane_ops.refusals(lane, sp)]
        if why:
            raise SavepointError(f"cannot roll back {_task(rt, lanes)} to savepoint {name}: " + "; ".join(why),
                                 _way_out(rt, name, lanes, missing))
        for lane, sp, _ in found:
            lane_ops.check_log(lane, sp)
        return [lane_ops.rollback(lane, sp, every) for lane, sp, every in found]


def delete_on(rt: TaskRuntime, name: str, targets: list[str] | None = None) -> list[SavepointReport]:
    """Drop savepoint `name` from each target (every target, or those named) that has it; its before-images go
    unless an older savepoint still needs them. Refused when none has it."""
    with task_lease(rt, doing=f"savepoint delete {name}"):
        lanes = _recovered(rt, targets)
        every = {lane.name: lane_ops.list_savepoints(lane) for lane in lanes}
        if not any(sp.name == name for sps in every.values() for sp in sps):
            if len(lanes) == 1:
                lane_ops.find(lanes[0], name)  # raises, naming the savepoints it has
            known = "; ".join(f"{n}: {', '.join(sp.name for sp in sps) or 'none'}" for n, sps in every.items())
            raise SavepointError(f"{_task(rt, lanes)} has no savepoint {name!r} on any of these targets ({known})",
                                 "list them with `cdc-assets savepoint list`")
        reports = []
        for lane in lanes:
            sp = next((s for s in every[lane.name] if s.name == name), None)
            reports.append(lane_ops.delete(lane, sp, every[lane.name]) if sp else
                           SavepointReport(name, None, 0.0, "not on", lane.name))
        return reports


def _task(rt: TaskRuntime, lanes: list[TaskRuntime]) -> str:
    if len(rt.lanes) == 1:
        return f"task {rt.config.task_id}"
    return f"task {rt.config.task_id} ({', '.join(lane.name for lane in lanes)})"


def _way_out(rt: TaskRuntime, name: str, lanes: list[TaskRuntime], missing: list[str]) -> str:
    if missing and len(missing) < len(lanes):
        having = " ".join(f"--target {lane.name}" for lane in lanes if lane.name not in missing)
        return (f"roll back only the targets that have it: cdc-assets savepoint rollback {name} {having}; "
                "list each target's savepoints with `cdc-assets savepoint list`")
    if missing:
        return "list them with `cdc-assets savepoint list`"
    only = "" if len(rt.lanes) == 1 else " (add --target NAME for one target)"
    return (f"delete the savepoint (cdc-assets savepoint delete {name}{only}); savepoints taken after the change can "
            "be rolled back to")
