"""Judging a split compared without a lock, round after round (engine/verify_window.py reads the rows).

Each round reads the source's range between a low and a high watermark, waits until the sync's checkpoint passed
the high one, reads the target's range, and learns which keys changed from the low watermark until after the
target's read. Only those keys can differ because of timing; every other key is equal on both sides, or the
target is wrong. Except for one thing: a MySQL writer's commit reaches the binlog a moment before it is visible to
reads, so a change logged just before the low watermark can be missing from the read. Hence:

- a key equal on both sides and unchanged in the round's window is settled;
- a key that differs is judged again by a later round, and is different for certain only when it differs again
  without having changed since the low watermark of the round before (`moved`: that longer window; `recent`: the
  round's own);
- a key that keeps changing stays unsettled.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cdc_assets.core.row_digest import SplitDiff


@dataclass
class Rounds:
    """What the rounds of one split found so far."""

    source_rows: int = 0
    target_rows: int = 0
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    pending: set[str] | None = None  # keys judged again by the next round; None before the first one
    rounds: int = 0
    rechecked: int = 0  # keys a later round judged again

    def judge(self, source: dict[str, str], target: dict[str, str], moved: set[str],
              recent: set[str] | None = None) -> None:
        """One round: row digests by key text on each side; `moved`: the keys that changed from the low watermark
        of the round before (of this one, in the first round) until after the target's read; `recent` (default
        `moved`): those that changed from this round's low watermark."""
        first = self.pending is None
        recent = moved if recent is None else recent
        if first:
            self.source_rows, self.target_rows = len(source), len(target)
        keys = source.keys() | target.keys() if first else self.pending
        pending = set()
        for key in keys:
            differs = source.get(key) != target.get(key)
            if (differs and (first or key in moved)) or key in recent:
                pending.add(key)
            elif differs:
                kind = self.missing if key not in target else self.extra if key not in source else self.changed
                kind.append(key)
        if not first:
            self.rechecked += len(keys)
        self.pending, self.rounds = pending, self.rounds + 1

    @property
    def settled(self) -> bool:
        return self.pending == set()

    @property
    def unsettled(self) -> set[str]:
        return self.pending or set()

    def diff(self) -> SplitDiff:
        """The keys different for certain (unsettled ones are not among them)."""
        return SplitDiff(self.source_rows, self.target_rows, sorted(self.missing), sorted(self.extra),
                         sorted(self.changed))
