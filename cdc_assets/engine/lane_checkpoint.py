"""Where one target's lane of the log phase stands: its checkpoint, the schemas it applies with, and the schema
records still to be written with its next checkpoint.

The schemas in use are recorded by version (`CdcSchema` / `v<n>`) and each checkpoint names its version, so a
restart decodes with the schemas of its time: a new version's records commit with the first checkpoint after it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from cdc_assets.core.positions import Position
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.resumer.resumer import Checkpoint


@dataclass
class LaneCheckpoint:
    position: Position  # every change before it is in the target (but for the tables ahead)
    version: int  # of the schemas
    events: int  # row changes applied since the log phase began
    schemas: dict[TableId, TableSchema]
    pending: list = field(default_factory=list)  # schema records to write with the next checkpoint

    def new_version(self, schemas: dict[TableId, TableSchema], resumer) -> None:
        """From the next checkpoint on, the lane applies with `schemas`."""
        self.schemas = schemas
        self.version += 1
        self.pending = [*self.pending, *resumer.schema_records(self.version, schemas)]

    def records(self, resumer, position: Position, events: int, ahead: Mapping[TableId, Position]) -> list:
        """What commits with a checkpoint at `position` after `events` more changes: the pending schema records,
        then the checkpoint's own."""
        self.events += events
        return [*self.pending,
                *resumer.checkpoint_records(Checkpoint(position, self.version, self.events, dict(ahead)))]

    def committed(self, position: Position) -> None:
        self.pending = []
        self.position = position
