"""What a lane of the log phase leaves out of the log it is handed: the changes its target holds already.

Three reasons, each ending at a position, after which the lane applies the log as it comes:

- the lane's own **checkpoint** (`floor`), while the session reads from an earlier lane's: every item up to it
  was applied before;
- **tables ahead** (`Checkpoint.ahead`): a table that joined the log phase from its own snapshot, or a lane behind
  the session's start, applied that table's changes up to its own position;
- the **split high watermarks** (exactly-once): the snapshot holds every change of a key up to the high watermark
  of the split holding the key (core/watermarks.py).

Pure: no I/O; the lane keeps one per session and asks it about each item in log order.
"""
from __future__ import annotations

from typing import Mapping

from cdc_assets.core.batches import split_key_change
from cdc_assets.core.events import SchemaChange, Transaction
from cdc_assets.core.positions import Position, is_before
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.watermarks import TableWatermarks


class SkipFilter:
    """The skipping state of one lane; each method says what it may leave out, and forgets what is behind it."""

    def __init__(self, ahead: Mapping[TableId, Position], watermarks: Mapping[TableId, TableWatermarks]) -> None:
        self.floor: Position | None = None  # the lane's checkpoint, while the session reads from before it
        self.ahead: dict[TableId, Position] = dict(ahead)  # tables that applied the log further than the lane
        self.watermarks: dict[TableId, TableWatermarks] = dict(watermarks)

    def behind(self, start: Position, checkpoint: Position, tables: Mapping[TableId, object]) -> None:
        """The session reads from `start`; when that is before the lane's `checkpoint`, everything up to the
        checkpoint is held already. Parts of a transaction are then held whole until its end shows whether the
        lane holds it (`may_skip`)."""
        if not is_before(start, checkpoint):
            return
        self.floor = checkpoint
        self.ahead = {t: self.ahead.get(t, checkpoint) for t in tables}

    def applied_before(self, item) -> bool:
        """Is `item` (a transaction, or anything positioned) at or before the lane's checkpoint? The first
        transaction past it ends the floor: from there on the lane applies what the others apply."""
        if self.floor is None:
            return False
        at = item.end if isinstance(item, Transaction) else getattr(item, "position", None)
        if at is not None and not is_before(self.floor, at):
            return True
        if isinstance(item, Transaction):
            self.floor = None
        return False

    def keep(self, tx: Transaction, schemas: Mapping[TableId, TableSchema]) -> tuple[Transaction, int]:
        """The part of `tx` to apply, and how many changes were left out: changes of tables that applied the log
        past `tx` already, and (exactly-once) changes the snapshot holds (at or before their split's high
        watermark; a key change counts as the delete of its old key and the insert of its new one)."""
        skipped = 0
        if self.ahead:
            kept = [c for c in tx.changes
                    if not ((p := self.ahead.get(c.table)) and not is_before(p, tx.end, ahead_of(c.table)))]
            skipped += len(tx.changes) - len(kept)
            self.ahead = {t: p for t, p in self.ahead.items() if is_before(tx.end, p, ahead_of(t))}
            tx = Transaction(kept, tx.end, tx.commit_time, tx.xid) if len(kept) != len(tx.changes) else tx
        if not self.watermarks:
            return tx, skipped
        parts = [p for c in tx.changes for p in split_key_change(c, schemas[c.table].primary_key)]
        kept = [p for p in parts if not ((w := self.watermarks.get(p.table)) and w.holds(p.key[0], tx.end))]
        skipped += len(parts) - len(kept)
        self.watermarks = {t: w for t, w in self.watermarks.items() if not w.plain(tx.end)}  # past: plain log mode
        return (Transaction(kept, tx.end, tx.commit_time, tx.xid) if len(kept) != len(parts) else tx), skipped

    def followed(self, change: SchemaChange) -> bool:
        """Is `change` of a table that applied the log past it already? Its definitions are then as of after
        it: a table that joined from its own snapshot was described, and read, after every change before its
        start (a table created, altered and written before it was added to source.tables)."""
        p = self.ahead.get(change.table)
        return (p is not None and change.position is not None
                and not is_before(p, change.position, ahead_of(change.table)))

    def may_skip(self, floor: Position) -> bool:
        """Might `keep` leave out changes of a transaction that ends after `floor`? Which ones depends on that
        end, known only at its commit: a transaction in parts is then held whole until it."""
        return (any(is_before(floor, p) for p in self.ahead.values())
                or any(not w.plain(floor) for w in self.watermarks.values()))

    def passed(self, checkpoint: Position) -> None:
        """The lane checkpoints at `checkpoint`: tables ahead only up to it are ahead no more."""
        self.ahead = {t: p for t, p in self.ahead.items() if is_before(checkpoint, p)}


def ahead_of(table) -> str:
    return f"where {table} applied the log up to (it joined from its own snapshot)"
