"""The log phase's side of savepoints: before a batch changes a target, the before-images of its keys, while the
target has a savepoint of the lane (sinks/before_images.py)."""
from __future__ import annotations

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.sinks.before_images import BeforeImages


class ImageWriter:
    """One lane's images, keyed by its `position_key` as its savepoints are. Looked up per batch inside the
    batch's transaction, so a savepoint counts from the first batch after it."""

    def __init__(self, lane: TaskRuntime) -> None:
        self.key = lane.position_key
        self.images = BeforeImages(lane.sink)
        self.active = self.images.exists()  # no savepoint was ever taken in this target: not even the lookup
        self._columns: dict[TableId, list[str]] = {}

    def capture(self, cursor, schemas: dict[TableId, TableSchema], net: dict[TableId, TableChanges]) -> None:
        if not self.active or not net:
            return
        epoch = self.images.newest_epoch(cursor, self.key)
        if epoch is None:
            return
        for table, changes in net.items():
            columns = self._columns.get(table)
            if columns is None:
                columns = self._columns[table] = self.images.shadow_columns(self.key, table)
            if columns:
                keys = [*changes.deletes, *changes.rows, *changes.partial, *changes.moves]
                self.images.capture(cursor, self.key, schemas[table], columns, keys, epoch)
