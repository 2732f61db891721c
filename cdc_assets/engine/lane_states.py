"""Where each target of a task stands, for those who decide from outside a run (the incremental launcher, the
CLI): each target's checkpoint, and the notes that name a target that is down, waiting or behind."""
from __future__ import annotations

from cdc_assets.core.positions import earliest, is_before, latest
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.target_down import answering
from cdc_assets.resumer.resumer import Checkpoint


def target_checkpoints(rt: TaskRuntime) -> tuple[Checkpoint | None, list[str]]:
    """The earliest checkpoint among the targets that answer (the log a run must read from), and a note per target
    that does not answer or lags behind the furthest one. One target: its checkpoint, no notes."""
    if len(rt.lanes) == 1:
        return rt.resumer.checkpoint(), []
    found, down = answering(rt.lanes, lambda lane: lane.resumer.checkpoint())
    notes = [f"target {name} is down ({why})" for name, why in down.items()]
    known = {n: c for n, c in found.items() if c is not None}
    if not known:
        return None, notes
    first = earliest([c.position for c in known.values()])
    furthest = latest([c.position for c in known.values()])
    for name, c in known.items():
        if is_before(c.position, furthest):
            notes.append(f"target {name} lags at {c.position}")
    notes += [f"target {n} has no checkpoint yet" for n, c in found.items() if c is None]
    return next(c for c in known.values() if c.position == first), notes


def run_key_part(rt: TaskRuntime) -> str:
    """What tells two launches apart besides the earliest checkpoint: every target's own position."""
    if len(rt.lanes) == 1:
        return ""
    found, down = answering(rt.lanes, lambda lane: lane.resumer.checkpoint())
    return ";".join(f"{lane.name}=" + ("down" if lane.name in down else str(found[lane.name].position)
                                       if found[lane.name] else "-") for lane in rt.lanes)
