"""Where each target of a task stands, for those who decide from outside a run (the incremental launcher, the
CLI): each target's checkpoint, and the notes that name a target that is down, waiting or behind."""
from __future__ import annotations

from dataclasses import dataclass, field

from cdc_assets.core.positions import earliest, is_before, latest
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.target_down import answering
from cdc_assets.resumer.resumer import Checkpoint


@dataclass(frozen=True)
class TargetCheckpoints:
    earliest: Checkpoint | None  # among the targets that answer: the log a run must read from
    notes: list[str] = field(default_factory=list)  # a target that does not answer, lags or has no checkpoint
    key: str = ""  # every target's own position (and rollback): what tells two launches apart besides `earliest`


def target_checkpoints(rt: TaskRuntime) -> TargetCheckpoints:
    """Each target's checkpoint, read once. One target: its checkpoint, no notes, no key."""
    if len(rt.lanes) == 1:
        return TargetCheckpoints(rt.resumer.checkpoint())
    found, down = answering(rt.lanes, lambda lane: lane.resumer.checkpoint())
    key = ";".join(f"{lane.name}=" + ("down" if lane.name in down else checkpoint_text(found[lane.name])) for lane in rt.lanes)
    notes = [f"target {name} is down ({why})" for name, why in down.items()]
    known = {n: c for n, c in found.items() if c is not None}
    if not known:
        return TargetCheckpoints(None, notes, key)
    first = earliest([c.position for c in known.values()])
    furthest = latest([c.position for c in known.values()])
    notes += [f"target {name} lags at {c.position}" for name, c in known.items() if is_before(c.position, furthest)]
    notes += [f"target {n} has no checkpoint yet" for n, c in found.items() if c is None]
    return TargetCheckpoints(next(c for c in known.values() if c.position == first), notes, key)


def checkpoint_text(checkpoint: Checkpoint | None) -> str:
    """A checkpoint's position, and the savepoint rollback that wrote it: a rollback brings back a position an
    earlier run started from, and the launcher's run keys must tell the two apart."""
    if checkpoint is None:
        return "-"
    return str(checkpoint.position) + (f"~{checkpoint.rolled_back_to}" if checkpoint.rolled_back_to else "")
