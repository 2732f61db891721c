"""The task's headroom: which position it needs the source to keep, and how close that is to being released."""
from __future__ import annotations

from cdc_assets.core.headroom import Headroom
from cdc_assets.core.positions import Position, earliest, position_from_json
from cdc_assets.engine.lane_states import target_checkpoints
from cdc_assets.engine.log_start import finished_of_plans
from cdc_assets.engine.runtime import TaskRuntime


def needed_position(rt: TaskRuntime) -> Position | None:
    """The checkpoint (tables ahead of it start later); without one, the minimum low watermark of the finished
    splits: the incremental phase will start there. None when neither exists yet."""
    checkpoint = target_checkpoints(rt).earliest  # several targets: the earliest that answers
    if checkpoint is not None:
        return checkpoint.position
    lows = [position_from_json(r.position_data["low_watermark"]) for r in finished_of_plans(rt)]
    return earliest(lows) if lows else None


def task_headroom(rt: TaskRuntime) -> Headroom:
    return rt.log.headroom(needed_position(rt))
