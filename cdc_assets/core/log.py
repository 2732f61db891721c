"""What the engine needs of a source's log, whatever its protocol (binlog, logical replication, change stream)."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Protocol

from cdc_assets.core.events import Idle, SchemaChange, Transaction, TransactionPart
from cdc_assets.core.positions import Position
from cdc_assets.core.tables import TableId, TableSchema

LogItem = Transaction | TransactionPart | SchemaChange | Idle


class LogReader(Protocol):
    def read(self, start: Position, stop_at: Position | None = None, part_events: int | None = None
             ) -> Iterator[LogItem]:
        """Yield what committed after `start`, in commit order: Transactions of the captured tables (with
        `part_events`, a big one comes first as TransactionParts of that many changes), SchemaChanges of captured
        tables, and Idle(boundary) when quiet. With `stop_at`, return once the log reached it, the last boundary
        reported as Idle; without it, read until `close()`. Raises PositionLost when `start` is gone."""

    def acknowledge(self, position: Position) -> None:
        """The target holds everything up to `position`: the source may release the log before it."""

    def close(self) -> None: ...


class Log(Protocol):
    def prepare(self, tables: list[TableId], replan: bool = False) -> Position | None:
        """Make the source keep its log from now on for these tables (a slot, a publication); before any watermark."""

    def reader(self, schemas: dict[TableId, TableSchema], purpose: str = "sync") -> LogReader:
        """A reader of the captured tables; `purpose` tells concurrent readers apart (sync, one per backfill)."""

    def earliest(self) -> Position: ...

    def position_at(self, when: datetime) -> Position: ...

    def distance(self, a: Position, b: Position) -> int:
        """Log bytes from `a` to `b`, 0 when `b` is not after `a`."""
