"""Which log changes the snapshot already holds, from each split's high watermark (exactly-once mode).

A split's rows were read between its low and high watermark and corrected by the log events of that window
before they committed (the backfill), so the target holds every change of a key up to the high watermark of
the split holding the key. The incremental phase skips those; once the log is past a table's largest high
watermark, nothing of that table can be skipped any more (plain log mode). Until then a batch of the log may
replay changes the snapshot read (`replaying_until`).
"""
from __future__ import annotations

from bisect import bisect_right
from decimal import Decimal
from typing import Mapping, Sequence

from cdc_assets.core.events import RowChange
from cdc_assets.core.positions import Position, is_before, latest
from cdc_assets.core.splits import KeyRange, SplitPlan
from cdc_assets.errors import PositionsIncomparable

ORDERED_KINDS = ("int", "decimal")  # split keys Python orders exactly as the source does


def key_value(kind: str, value):
    return Decimal(value) if kind == "decimal" and not isinstance(value, Decimal) else value


def in_range(kind: str, value, r: KeyRange) -> bool:
    value = key_value(kind, value)
    return ((r.start is None or key_value(kind, r.start) <= value)
            and (r.end is None or value < key_value(kind, r.end)))


class TableWatermarks:
    def __init__(self, plan: SplitPlan, highs: dict[int, Position]) -> None:
        self.kind = plan.key_kind
        self.subject = f"the split high watermarks of {plan.table}"
        self.bounds = [key_value(self.kind, b) for b in plan.boundaries]
        self.highs = [highs[i] for i in range(len(plan.estimated_rows))]
        self.largest = latest(self.highs)

    def holds(self, split_key, end: Position) -> bool:
        """Does the target already hold a change of this key that committed at `end`?"""
        if is_before(self.largest, end, self.subject):
            return False  # plain log mode
        split = bisect_right(self.bounds, key_value(self.kind, split_key))
        return not is_before(self.highs[split], end, self.subject)

    def plain(self, position: Position) -> bool:
        return not is_before(position, self.largest, self.subject)


def batch_start(changes: Sequence[RowChange], floor: Position | None = None) -> Position | None:
    """Where a batch's changes lie at or after: its first change's position, else `floor` (a transaction part's,
    for changes not positioned yet: PostgreSQL's get theirs at the commit, which lies after it)."""
    first = changes[0].position if changes else None
    return floor if first is None else first


def replaying_until(horizons: Mapping, table, first: Position | None) -> Position | None:
    """The table's snapshot horizon (the largest high watermark of its splits, in `horizons`) while a batch whose
    changes lie at or after `first` may replay what the snapshot read: once `first` is past the horizon, none of
    them is before it."""
    horizon = horizons.get(table)
    if horizon is None or first is None:
        return horizon
    try:
        return None if is_before(horizon, first) else horizon
    except PositionsIncomparable:  # another server's log (a failover): each move is judged alone, as before
        return horizon
