"""Which tables the log phase applies, when `source.tables` changed after the first checkpoint.

A table added to the config is planned and snapshotted like any other; until every split of it is finished it
*waits* and the log phase goes on for the others. Once finished it *joins*: the log is read again from its
minimum low watermark (its own start, usually before the task's checkpoint), its changes are applied from
there while the other tables skip what they applied already. A table removed from the config stops being
applied; its plan is dropped, so adding it back snapshots it again.

On PostgreSQL the slot must still hold the log from a joining table's start: the log phase never acknowledges
past the `planned_at` position of a table that waits (see `release_bound`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection

from cdc_assets.core.positions import Position, earliest, position_from_json
from cdc_assets.core.tables import TableId
from cdc_assets.engine.log_start import finished_of_plans, snapshot_progress
from cdc_assets.engine.runtime import TaskRuntime


@dataclass(frozen=True)
class Membership:
    joining: dict[TableId, Position] = field(default_factory=dict)  # table -> minimum low watermark of its splits
    waiting: list[str] = field(default_factory=list)  # "3/12 splits of shop.orders finished" per waiting table
    removed: list[TableId] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.joining or self.removed)


def membership(rt: TaskRuntime, applied: Collection[TableId]) -> Membership:
    """Compare the tables the log phase applies (`applied`: the checkpoint's schema version) with the config."""
    configured = rt.config.source.table_ids
    lows: dict[TableId, list[Position]] = {}
    for record in finished_of_plans(rt):
        d = record.position_data
        lows.setdefault(TableId(d["schema"], d["tb"]), []).append(position_from_json(d["low_watermark"]))
    joining, waiting = {}, []
    for table, done, total in snapshot_progress(rt):
        if table in applied:
            continue
        if total and done == total:
            joining[table] = earliest(lows[table])
        else:
            waiting.append(f"{done}/{total} splits of {table} finished" if total else f"{table} is not planned yet")
    return Membership(joining, waiting, [t for t in applied if t not in configured])


def release_bound(rt: TaskRuntime, applied: Collection[TableId], position: Position) -> Position:
    """How far the source may release its log (the PostgreSQL slot's acknowledgement): `position`, but never
    past where a planned table that has not joined yet was planned, since its low watermarks come after that."""
    holds = [position_from_json(p.planned_at) for p in rt.plans.all()
             if p.table not in applied and p.planned_at is not None]
    holds = [h for h in holds if type(h) is type(position)]
    return earliest([position, *holds])
