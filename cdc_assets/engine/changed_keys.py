"""Which keys of a table the source's log changed between two positions, read by a reader of its own beside the
sync's: the window that lets verification (engine/verify_window.py) and a repair (engine/repair.py) work without
holding anything on the source."""
from __future__ import annotations

import uuid
from typing import Callable

from cdc_assets.core.batches import split_key_change
from cdc_assets.core.events import SchemaChange, Transaction
from cdc_assets.core.positions import Position, is_before
from cdc_assets.core.tables import TableSchema


def changed_in_log(rt, schema: TableSchema, low: Position, end: Position,
                   text: Callable[[tuple], object] = tuple) -> list[tuple[Position, object]] | None:
    """The keys (old and new ones of a key change; each as `text` renders it) of the table's changes committed
    from `low` to `end`, each with its transaction's end; None when the table's definition changed in between
    (keys cannot be told then)."""
    moved: list[tuple[Position, object]] = []
    if not is_before(low, end):
        return moved
    reader = rt.log.reader({schema.table: schema}, purpose=f"window#{uuid.uuid4().hex}")
    try:
        for item in reader.read(low, stop_at=end):
            if isinstance(item, SchemaChange) and item.table in (None, schema.table):
                return None
            if not isinstance(item, Transaction):
                continue
            for change in item.changes:
                if change.table == schema.table:
                    moved += [(item.end, text(part.key)) for part in split_key_change(change, schema.primary_key)]
            if is_before(end, item.end):
                break
    finally:
        reader.close()
    return moved
