"""Shrinks a failing scenario: fewer tables, fewer transactions, fewer seed rows, fewer faults, as long as it
still fails the same way (the same status), so what is left is small enough to read."""
from __future__ import annotations

from cdc_assets_tests.adversary.scenario import Scenario
from cdc_assets_tests.adversary.schema import q

FIELDS = ("during_log", "during_snapshot", "setup", "faults")


def halves(items: tuple) -> list[tuple]:
    """Candidates with a half, then a quarter, ... of `items` removed (first half, second half, ...)."""
    out, size = [], len(items) // 2
    while size >= 1:
        out += [items[:i] + items[i + size:] for i in range(0, len(items), size)]
        size //= 2
        if len(out) > 12:
            break
    return out


def without_table(scenario: Scenario, name: str) -> Scenario:
    """The scenario without table `name` and every statement naming it (emptied transactions dropped)."""
    mark = f".{q(scenario.source, name)}"
    keep = lambda statements: tuple(s for s in statements if mark not in s)  # noqa: E731
    return scenario.shrunk(tables=tuple(t for t in scenario.tables if t.name != name), setup=keep(scenario.setup),
                           during_snapshot=tuple(tx for tx in map(keep, scenario.during_snapshot) if tx),
                           during_log=tuple(tx for tx in map(keep, scenario.during_log) if tx))


def candidates(current: Scenario, field: str) -> list[Scenario]:
    if field == "tables":
        return [without_table(current, t.name) for t in current.tables] if len(current.tables) > 1 else []
    return [current.shrunk(**{field: c}) for c in halves(getattr(current, field))]


def shrink(scenario: Scenario, failed, servers, budget: int = 16) -> Scenario:
    """At most `budget` reruns. Removing a seed row leaves statements naming it: they then change nothing,
    which keeps every candidate runnable (one that errors does not fail the same way, and is not kept)."""
    from cdc_assets_tests.adversary.runner import run

    current = scenario
    for field in ("tables", *FIELDS):
        improved = True
        while improved and budget > 0:
            improved = False
            for trial in candidates(current, field):
                if budget <= 0:
                    break
                budget -= 1
                if run(trial, servers).status == failed.status:
                    current, improved = trial, True
                    break
    return current
