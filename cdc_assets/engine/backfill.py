"""Exactly-once snapshot: the backfill corrects a group's staged rows with the log events of its window.

The rows of a split were read at some moment between the low and the high watermark. Replaying the log
events of that window for keys of the split, inside the commit transaction after the staged rows went in,
leaves the target holding each key as of the high watermark; the incremental phase then skips those events.
Events are applied in bounded batches through the same cursor: nothing accumulates in Python memory and
nothing is visible before the commit.
"""
from __future__ import annotations

import uuid

from cdc_assets.core.batches import compact, split_key_change
from cdc_assets.core.events import SchemaChange, Transaction
from cdc_assets.core.positions import Position, is_before
from cdc_assets.core.splits import Split, SplitPlan
from cdc_assets.core.tables import TableSchema
from cdc_assets.core.watermarks import in_range
from cdc_assets.engine.faults import crash_point
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.schema_changes import SchemaChangeHalted


def backfill(rt: TaskRuntime, cursor, schema: TableSchema, plan: SplitPlan, splits: list[Split],
             low: Position, high: Position) -> int:
    """Apply the window's changes of keys in `splits` through `cursor`; the number of changes applied."""
    if not is_before(low, high):
        return 0
    ranges = [s.range for s in splits]
    limit = rt.config.pipeline.checkpoint_after_events
    # Split groups commit in parallel runs: each backfill is its own replica connection, with its own server_id
    # (a second connection with a taken id is refused or throws the first one off).
    reader = rt.log.reader({schema.table: schema}, purpose=f"backfill#{splits[0].id}#{uuid.uuid4().hex}")
    pending, applied = [], 0

    def apply() -> None:
        nonlocal pending, applied
        for table_changes in compact(pending, {schema.table: schema}).values():
            rt.sink.apply_changes(cursor, schema, table_changes)
        crash_point("snapshot.backfill")
        applied, pending = applied + len(pending), []

    try:
        for item in reader.read(low, stop_at=high):
            if isinstance(item, SchemaChange):
                raise SchemaChangeHalted(item, "halt during the snapshot")
            if not isinstance(item, Transaction):
                continue
            if is_before(high, item.end):
                break  # committed after the high watermark: the incremental phase applies it
            for change in item.changes:
                for part in split_key_change(change, schema.primary_key):
                    if any(in_range(plan.key_kind, part.key[0], r) for r in ranges):
                        pending.append(part)
            if len(pending) >= limit:
                apply()
        if pending:
            apply()
    finally:
        reader.close()
    return applied
