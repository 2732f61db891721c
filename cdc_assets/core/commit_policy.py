"""Which targets' acknowledgements move a task's checkpoint (DeltaForge's commit policy).

`all`: every target; `required`: the targets marked `required`; `quorum(n)`: any n of them. The task's
checkpoint is the furthest position the policy's targets all reached; a target outside the policy may fail or fall
behind without holding the others. Pure: positions in, a decision out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from cdc_assets.core.positions import Position, is_before

_FORM = re.compile(r"^(all|required|quorum\((\d+)\))$")


class PolicyNotMet(Exception):
    """Fewer targets acknowledged than the policy needs: nothing counts as done."""


@dataclass(frozen=True)
class CommitPolicy:
    text: str  # as configured: all | required | quorum(n)
    required: frozenset[str]  # the targets marked required
    targets: tuple[str, ...]  # every target, in config order

    @classmethod
    def parse(cls, text: str, targets: Mapping[str, bool]) -> "CommitPolicy":
        """`targets`: name -> required."""
        if not _FORM.match(text):
            raise ValueError(f"unknown commit policy {text!r}: all, required or quorum(n)")
        return cls(text, frozenset(n for n, r in targets.items() if r), tuple(targets))

    @property
    def quorum(self) -> int:
        """How many targets must acknowledge."""
        found = _FORM.match(self.text).group(2)
        if found is not None:
            return int(found)
        return len(self.required) if self.text == "required" else len(self.targets)

    def tolerates(self, name: str) -> bool:
        """May this target fail without failing the task? (Under quorum(n), any target, while n others stand.)"""
        if self.text == "all":
            return False
        if self.text == "required":
            return name not in self.required
        return self.quorum < len(self.targets)

    def met(self, acknowledged: set[str]) -> bool:
        """Did these targets' acknowledgements satisfy the policy?"""
        if self.text == "required":
            return self.required <= acknowledged
        return len(acknowledged & set(self.targets)) >= self.quorum

    def missing(self, acknowledged: set[str]) -> str:
        """Why `acknowledged` does not meet the policy, naming targets."""
        if self.text == "required":
            return f"required targets {sorted(self.required - acknowledged)} did not acknowledge"
        return (f"{len(acknowledged)} of {len(self.targets)} targets acknowledged ({sorted(acknowledged) or 'none'}); "
                f"commit_policy {self.text} needs {self.quorum}")

    def checkpoint(self, positions: Mapping[str, Position | None]) -> Position | None:
        """The task's checkpoint: the furthest position that enough targets reached (None: unknown or not met).

        `positions`: each target's own checkpoint, None where it has none or could not be read."""
        if self.text == "required":
            counted = [positions.get(n) for n in sorted(self.required)]
            if any(p is None for p in counted):
                return None
            return _nth_furthest(counted, len(counted))
        known = [p for n, p in positions.items() if n in self.targets and p is not None]
        if len(known) < self.quorum:
            return None
        return _nth_furthest(known, self.quorum)


def _nth_furthest(positions: list[Position], n: int) -> Position:
    """The position at least `n` of `positions` reached: the n-th furthest."""
    ordered: list[Position] = []
    for p in positions:  # insertion sort by is_before: positions order only pairwise
        i = 0
        while i < len(ordered) and not is_before(ordered[i], p):
            i += 1
        ordered.insert(i, p)
    return ordered[n - 1]
