"""Repairing a split that failed verification: its next materialization reads it again, although finished.

A finished split is never read again (engine/snapshot.py), so a failed verification marks it: the split is
re-read while its last `SplitVerify` record says failed *and* names the finished marker that is still current
(its high watermark). The re-read's commit writes a new finished marker, which ends the repair; a verification
that passes ends it too.

The re-read runs while the log phase keeps applying the table. Its read and its commit happen under a hold of
the split's range on the source (sources/split_hold.py): the log then holds no change of the range between the
read and the commit, so the sync can neither apply a newer change the commit would overwrite, nor miss one; a
change before the hold that the sync applies late is a replay of the rows' history over their final state
and ends in the same rows (at-least-once, as after any snapshot). Writers of the range (PostgreSQL: of the
table) wait for the re-read's Spark read and commit.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Iterator

from cdc_assets.core.splits import Split, SplitPlan
from cdc_assets.core.tables import TableSchema
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.verify import FAILED, last_results
from cdc_assets.resumer.records import PositionRecord


def needing_repair(rt: TaskRuntime, finished: dict[str, PositionRecord]) -> set[str]:
    """Of these finished splits, those whose current finished marker failed its last verification."""
    if not finished:
        return set()
    results = last_results(rt, list(finished))
    return {s for s, r in results.items()
            if r.position_data.get("status") == FAILED
            and r.position_data.get("high_watermark") == finished[s].position_data.get("high_watermark")}


@contextmanager
def held_for_repair(rt: TaskRuntime, plan: SplitPlan, schema: TableSchema, splits: list[Split]) -> Iterator[None]:
    """Hold the ranges of the splits being repaired still on the source until their commit settled."""
    with ExitStack() as stack:
        for split in splits:
            stack.enter_context(rt.source.hold_split(schema, split.range, plan.key_kind))
        yield
