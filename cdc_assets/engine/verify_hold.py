"""Verification's hold of a split's range, taken again when the source's writers are in its way.

The hold is a locking read (sources/split_hold.py). Writers that change keys or delete and re-insert rows of the
range lock them in another order than the hold's scan, so InnoDB may end either in a deadlock (1213), and a
writer's long transaction makes the hold wait. Verification waits briefly (HOLD_WAIT_SECS, its own session's
lock wait) so that the application's transactions are not the ones kept waiting behind its lock request, and on a
refusal tries again after a growing, jittered pause; after BUSY_TRIES refusals the split is inconclusive.
"""
from __future__ import annotations

import random
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from cdc_assets.core.splits import Split, SplitPlan
from cdc_assets.core.tables import TableSchema
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import SourceBusy

HOLD_WAIT_SECS = 1.0  # the hold's own lock wait (MySQL counts whole seconds)
BUSY_TRIES = 8
BACKOFF_SECS = (0.1, 2.0)  # first pause, longest pause; each doubles the one before, times 0.5-1 at random


@dataclass
class Refusals:
    """What the source answered each refused try with: DEADLOCK or LOCK_WAIT_TIMEOUT (dbapi/errors.py)."""

    conflicts: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.conflicts)

    def __str__(self) -> str:
        counts = {c: self.conflicts.count(c) for c in dict.fromkeys(self.conflicts)}
        return ", ".join(f"{n} {c}{'s' if n > 1 else ''}" for c, n in counts.items())


def pause(attempt: int, rng: random.Random) -> float:
    first, longest = BACKOFF_SECS
    return min(longest, first * 2 ** attempt) * rng.uniform(0.5, 1.0)


@contextmanager
def held(rt: TaskRuntime, schema: TableSchema, plan: SplitPlan, split: Split, refusals: Refusals) -> Iterator[Any]:
    """The split's hold (rows as the target compares them), taken again after each refusal noted in `refusals`;
    raises the last SourceBusy after BUSY_TRIES refusals."""
    rng = random.Random()
    tries = BUSY_TRIES
    for attempt in range(tries):
        with ExitStack() as stack:
            try:
                hold = stack.enter_context(rt.source.hold_split(schema, split.range, plan.key_kind,
                                                                rt.sink.target_format(), HOLD_WAIT_SECS))
            except SourceBusy as exc:
                refusals.conflicts.append(exc.conflict)
                if attempt + 1 >= tries:
                    raise
                time.sleep(pause(attempt, rng))
                continue
            yield hold
            return
