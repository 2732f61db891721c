"""Repairing a split that failed verification: its next materialization reads it again, although finished.

A finished split is never read again (engine/snapshot.py), so a failed verification marks it: the split is
re-read while its last `SplitVerify` record says failed *and* names the finished marker that is still current
(its high watermark). The re-read's commit writes a new finished marker, which ends the repair; a verification
that passes ends it too.

The re-read runs while the log phase keeps applying the table, and holds nothing on the source:

    P = the source's log end; on PostgreSQL also each row's version (xmin) in the range, by key
    (MySQL/MariaDB: a second passes, so every commit logged before P is visible to reads)
    the split read into staging between its low and high watermarks, as any snapshot group
    wait until the sync's checkpoint passed the high watermark
    one target transaction:
        hold the range in the target: the sync's writes to it wait from here (sinks/repair_rows.py)
        the keys changed since P: the log from P to the source's log end read now (a reader of its own), or the
            rows whose version is no longer the one read before the read
        copy the target's rows of those keys aside; replace the range's rows with the staged ones; put them back
        a new finished marker

Why that is exact. A key no change touched from P to the end read under the hold had one value all along, which
the read staged; a change after that end reaches the target only after the commit, through the sync. A key that
changed is left as the sync made it: the target held its changes up to the checkpoint, the sync applies the rest.
The checkpoint is past the high watermark before the commit, so the new marker never makes a restarted sync skip a
change the target lacks (exactly-once), and the backfill has nothing to add. A corrupted row whose key the log
changed meanwhile is left to that change, or to the next verification.

A target that cannot hold a range (MongoDB) is repaired the older way: the split's range held on the source
(sources/split_hold.py) from before the read until its commit settled; the range's writers wait meanwhile.
"""
from __future__ import annotations

import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Iterator

from cdc_assets.core.positions import Position
from cdc_assets.core.splits import Split, SplitPlan
from cdc_assets.core.tables import TableSchema
from cdc_assets.engine.changed_keys import changed_in_log
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.verify import FAILED, WAIT_SECS, last_results
from cdc_assets.engine.verify_sync import wait_for
from cdc_assets.errors import CdcError
from cdc_assets.resumer.records import PositionRecord

# A MySQL commit reaches the binlog a moment (well under a millisecond, a group commit's fsync at most) before
# reads see it: a second between P and the read covers it.
VISIBLE_SECS = 1.0


class RepairFailed(CdcError):
    """A split's repair could not be committed exactly; nothing of it was written. The message names the split
    and why; the way out is to materialize it again once the cause is gone."""


def needing_repair(rt: TaskRuntime, finished: dict[str, PositionRecord]) -> set[str]:
    """Of these finished splits, those whose current finished marker failed its last verification."""
    if not finished:
        return set()
    results = last_results(rt, list(finished))
    return {s for s, r in results.items()
            if r.position_data.get("status") == FAILED
            and r.position_data.get("high_watermark") == finished[s].position_data.get("high_watermark")}


def lock_free(lanes: list[TaskRuntime]) -> bool:
    return all(lane.sink.repairs_lock_free for lane in lanes)


@dataclass
class Window:
    """Opened before a repaired split's read: tells, under the target's hold, which keys changed since."""

    split: Split
    start: Position
    versions: dict[tuple, str] | None  # PostgreSQL: each row's version before the read
    moved: set[tuple]  # found in the log so far (from `start`)

    @classmethod
    def open(cls, rt: TaskRuntime, plan: SplitPlan, schema: TableSchema, split: Split) -> "Window":
        start = rt.source.current_position()
        if rt.source.row_versions:
            return cls(split, start, rt.source.key_versions(schema, split.range, plan.key_kind), set())
        time.sleep(VISIBLE_SECS)
        return cls(split, start, None, set())

    def read_ahead(self, rt: TaskRuntime, plan: SplitPlan, schema: TableSchema) -> None:
        """Read the log so far before the target's hold, so that the hold waits only for the log since. Row
        versions are read once, under the hold."""
        if self.versions is None:
            self.changed(rt, plan, schema)

    def changed(self, rt: TaskRuntime, plan: SplitPlan, schema: TableSchema) -> set[tuple]:
        """The keys changed since the window opened, up to now; called again, it reads only the log since."""
        if self.versions is not None:
            return rt.source.changed_keys(schema, self.split.range, plan.key_kind, self.versions)
        end = rt.source.current_position()
        logged = changed_in_log(rt, schema, self.start, end)
        if logged is None:
            raise RepairFailed(f"{self.split.id} of {schema.table}: the table's definition changed during its repair "
                               f"(between {self.start} and {end}); nothing was written",
                               "materialize the split again once the sync applied the change")
        self.moved |= {key for _, key in logged}
        self.start = end
        return self.moved


def wait_for_sync(lanes: list[TaskRuntime], split: Split, high: Position, wait_secs: float = WAIT_SECS) -> None:
    """The repair's commit waits until each target's checkpoint passed the read's high watermark."""
    for lane in lanes:
        reached, at = wait_for(lane, high, wait_secs)
        if not reached:
            where = f" in target {lane.name}" if len(lanes) > 1 else ""
            raise RepairFailed(f"{split.id} of {split.table}: the repair waits for the sync to apply the log past its "
                               f"read ({high}), but the checkpoint{where} is at {at or 'nothing yet'} after "
                               f"{wait_secs:.0f} s; nothing was written",
                               "start the sync (`cdc-assets sync` or the incremental job) and let it catch up, then "
                               "materialize the split again")


@contextmanager
def held_for_repair(rt: TaskRuntime, lanes: list[TaskRuntime], plan: SplitPlan, schema: TableSchema,
                    splits: list[Split]) -> Iterator[None]:
    """Where a target cannot hold a range (MongoDB): hold the repaired splits' ranges still on the source until
    their commit settled."""
    with ExitStack() as stack:
        if not lock_free(lanes):
            for split in splits:
                stack.enter_context(rt.source.hold_split(schema, split.range, plan.key_kind))
        yield
