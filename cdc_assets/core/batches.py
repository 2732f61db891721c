"""Batches of committed transactions, and their compaction by key (last change wins).

A batch always ends at a transaction end, so its `end` is a position the log can be resumed from. After
compaction each key of a table has one final action: a delete, a full row, or a partial row (an update whose
new image lacks unchanged TOASTed columns: only the columns it has may be written).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cdc_assets.core.events import Op, RowChange, Transaction
from cdc_assets.core.positions import Position
from cdc_assets.core.tables import TableId, TableSchema


@dataclass
class Batch:
    transactions: list[Transaction] = field(default_factory=list)
    events: int = 0

    def add(self, tx: Transaction) -> None:
        self.transactions.append(tx)
        self.events += len(tx.changes)

    @property
    def end(self) -> Position:
        return self.transactions[-1].end

    @property
    def commit_time(self) -> float | None:
        return self.transactions[-1].commit_time

    def __bool__(self) -> bool:
        return bool(self.transactions)


@dataclass
class TableChanges:
    """The net effect of a batch on one table."""

    table: TableId
    rows: dict[tuple, dict] = field(default_factory=dict)  # key -> full row
    partial: dict[tuple, dict] = field(default_factory=dict)  # key -> some columns (the key among them)
    deletes: set[tuple] = field(default_factory=set)

    @property
    def size(self) -> int:
        return len(self.rows) + len(self.partial) + len(self.deletes)

    def delete(self, key: tuple) -> None:
        self.rows.pop(key, None)
        self.partial.pop(key, None)
        self.deletes.add(key)

    def put(self, key: tuple, after: dict, full: bool) -> None:
        self.deletes.discard(key)
        if full:
            self.partial.pop(key, None)
            self.rows[key] = after
        elif key in self.rows:
            self.rows[key] = {**self.rows[key], **after}
        else:
            self.partial[key] = {**self.partial.get(key, {}), **after}


def compact(changes: list[RowChange], schemas: dict[TableId, TableSchema]) -> dict[TableId, TableChanges]:
    """Fold changes in log order into one action per key. An update that moves a row to another key deletes the
    old key first."""
    out: dict[TableId, TableChanges] = {}
    widths = {t: len(s.columns) for t, s in schemas.items()}
    keys = {t: s.primary_key for t, s in schemas.items()}
    for change in changes:
        net = out.get(change.table)
        if net is None:
            net = out[change.table] = TableChanges(change.table)
        if change.op is Op.DELETE:
            net.delete(change.key)
            continue
        if change.op is Op.UPDATE and change.before is not None:
            old = old_key(change.before, keys[change.table])
            if old is not None and old != change.key:
                net.delete(old)
        net.put(change.key, change.after, len(change.after) >= widths[change.table])
    return out


def old_key(before: dict, key_columns: tuple[str, ...]) -> tuple | None:
    if not all(k in before for k in key_columns):
        return None
    return tuple(before[k] for k in key_columns)


def split_key_change(change: RowChange, key_columns: tuple[str, ...]) -> list[RowChange]:
    """An update that moves a row to another key, as a delete of the old key and an insert of the new one, so
    that each can be judged by the split holding its own key."""
    if change.op is not Op.UPDATE or change.before is None:
        return [change]
    old = old_key(change.before, key_columns)
    if old is None or old == change.key:
        return [change]
    return [RowChange(change.table, Op.DELETE, old, None, change.before, change.position),
            RowChange(change.table, Op.INSERT, change.key, change.after, None, change.position)]
