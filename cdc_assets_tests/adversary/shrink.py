"""Shrinks a failing scenario: fewer seed rows, fewer transactions, fewer faults, as long as it still fails the
same way (the same status), so what is left is small enough to read."""
from __future__ import annotations

from cdc_assets_tests.adversary.scenario import Scenario


def halves(items: tuple) -> list[tuple]:
    """Candidates with a half, then a quarter, ... of `items` removed (first half, second half, ...)."""
    out, size = [], len(items) // 2
    while size >= 1:
        out += [items[:i] + items[i + size:] for i in range(0, len(items), size)]
        size //= 2
        if len(out) > 12:
            break
    return out


def shrink(scenario: Scenario, failed, servers, budget: int = 12) -> Scenario:
    """At most `budget` reruns. Removing a seed row leaves statements naming it: they then change nothing,
    which keeps every candidate runnable."""
    from cdc_assets_tests.adversary.runner import run

    current = scenario
    for field in ("during_log", "during_snapshot", "setup", "faults"):
        improved = True
        while improved and budget > 0:
            improved = False
            for candidate in halves(getattr(current, field)):
                if budget <= 0:
                    break
                budget -= 1
                trial = current.shrunk(**{field: candidate})
                if run(trial, servers).status == failed.status:
                    current, improved = trial, True
                    break
    return current
