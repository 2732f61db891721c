"""Batches of committed transactions, and their compaction by key (last change wins).

A batch always ends at a transaction end, so its `end` is a position the log can be resumed from. After
compaction each key of a table has one final action: a delete, a full row, a partial row (an update whose
new image lacks unchanged TOASTed columns: only the columns it has may be written), or a move (a key change
whose new image lacks such columns: the row the target holds under the old key, as of the batch start, with the
columns the log carried written over it).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from cdc_assets.core.events import Op, RowChange, Transaction
from cdc_assets.core.positions import Position
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.errors import REPLAN_HINT, CdcError


class MoveIncomplete(CdcError):
    """A moved row's unchanged columns are neither in the log nor in the target (a PostgreSQL key change with an
    unchanged TOAST value). Way out: `REPLICA IDENTITY FULL` on the source table, then `cdc-assets plan --replan`
    (docs/connectors/postgres.md)."""


class ShortInsert(CdcError):
    """An inserted row lacks columns of the table's recorded schema: the source table lost them, or added them
    after the row (a first run records the definitions it starts with). Way out: restore a dropped column on the
    source, or `cdc-assets plan --replan`."""


@dataclass(frozen=True)
class Move:
    """The row under `origin` in the target (as of the batch start), with `columns` (the new key among them)
    written over it."""

    origin: tuple
    columns: dict
    position: Position | None = None  # of the key change, for errors
    # The batch freed the new key before the move: the target may hold an older row there at the batch start.
    vacated: bool = False


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
class MovesAcrossParts:
    """How the moves of a transaction handed out in parts are judged across its parts, which one target
    transaction applies one after the other (core/transaction_parts.py).

    - Whether the target committed a move before is told by each table's move mark *as the transaction found it*:
      a later part reading the mark its own earlier part wrote would take its moves for a replay.
    - A move replayed over a snapshot copies the target's row under the old key, unless the batch fills that key
      again after the move (a split may hold the later row: `core.move_source`). A part cannot see what later
      parts do, so the old keys copied that way are kept here: a later part that touches one of them again
      stops the transaction, which commits nothing.
    - A replay after a crash rewrites what the target held, part by part: a later part's move the target committed
      before finds under its new key what an earlier part put back there, not the moved row. The keys each part
      wrote are kept, and which of them the target holds whole as the source had them then (`core.move_source`)."""

    marks: dict[TableId, Any] = field(default_factory=dict)  # table -> its move mark before the first part
    copied: dict[TableId, set[tuple]] = field(default_factory=dict)  # old keys copied while replaying
    # keys the earlier parts wrote, deleted or moved -> the columns, where they only wrote some (else None)
    written: dict[TableId, dict[tuple, frozenset | None]] = field(default_factory=dict)
    whole: dict[TableId, set[tuple]] = field(default_factory=dict)  # of those, the rows they left as the source had


@dataclass
class TableChanges:
    """The net effect of a batch on one table."""

    table: TableId
    rows: dict[tuple, dict] = field(default_factory=dict)  # key -> full row
    partial: dict[tuple, dict] = field(default_factory=dict)  # key -> some columns (the key among them)
    deletes: set[tuple] = field(default_factory=set)
    moves: dict[tuple, Move] = field(default_factory=dict)  # new key -> where its row comes from
    # Keys of `rows` whose first change in the batch was an INSERT: absent from the target at the batch start,
    # unless the batch replays changes the target holds already (after a crash, or over a snapshot's reads).
    # A sink may insert them without looking for them first, as long as a key already there stops it.
    fresh: set[tuple] = field(default_factory=set)
    events: int = 0  # the changes folded in
    # The table's largest split high watermark while the log replays changes the snapshot may already hold
    # (at-least-once from the minimum low watermark): a move at or before it whose two keys the target lacks
    # was superseded by what the snapshot read later (a later change or delete of the new key), not lost.
    replaying_until: Position | None = None
    # Of a transaction's part: its changes are not positioned yet, but lie after this (TransactionPart.floor).
    floor: Position | None = None
    last: Position | None = None  # the batch's last change's, when positioned (sinks.moves: a replay's reach)
    # Of a transaction handed out in parts: what its earlier parts, applied in the same target transaction, leave
    # for the later ones (None outside one).
    parts: "MovesAcrossParts | None" = None
    prepared: Any = None  # what the sink rendered of it ahead of applying it (Sink.prepare_changes)

    @property
    def size(self) -> int:
        return len(self.rows) + len(self.partial) + len(self.deletes) + len(self.moves)

    @property
    def in_parts(self) -> bool:
        return self.parts is not None

    def touched(self) -> set[tuple]:
        """Every key the batch writes, deletes, moves to or moves from."""
        return (set(self.rows) | set(self.partial) | self.deletes | set(self.moves)
                | {m.origin for m in self.moves.values()})

    def delete(self, key: tuple) -> None:
        self.fresh.discard(key)
        self.rows.pop(key, None)
        self.partial.pop(key, None)
        self.moves.pop(key, None)
        self.deletes.add(key)

    def put(self, key: tuple, after: dict, full: bool) -> None:
        self.deletes.discard(key)
        if full:
            self.partial.pop(key, None)
            self.moves.pop(key, None)
            self.rows[key] = after
        elif key in self.rows:
            self.rows[key] = {**self.rows[key], **after}
        elif key in self.moves:
            move = self.moves[key]
            self.moves[key] = replace(move, columns={**move.columns, **after})
        else:
            self.partial[key] = {**self.partial.get(key, {}), **after}

    def move(self, old: tuple, new: tuple, after: dict, position: Position | None) -> None:
        """A key change whose new image lacks columns: they are the old key's, wherever that row is now (in this
        batch, or in the target when the batch has only changed some of its columns)."""
        if old in self.rows:
            row = self.rows[old]
            self.delete(old)
            self.put(new, {**row, **after}, full=True)
            return
        if old in self.moves:  # a chain: the row still comes from the first origin
            earlier = self.moves[old]
            origin, columns = earlier.origin, {**earlier.columns, **after}
        else:  # a real log never moves a key it deleted earlier in the batch: `old` is in the target
            origin, columns = old, {**self.partial.get(old, {}), **after}
        self.delete(old)
        vacated = new in self.deletes
        self.deletes.discard(new)  # the new key was free in the source: a row there earlier is gone
        self.fresh.discard(new)
        self.rows.pop(new, None)
        self.partial.pop(new, None)
        self.moves[new] = Move(origin, columns, position, vacated)


def compact(changes: list[RowChange], schemas: dict[TableId, TableSchema]) -> dict[TableId, TableChanges]:
    """Fold changes in log order into one action per key; the result applied at once equals the changes applied
    one by one. An update that moves a row to another key deletes the old key; when its new image lacks columns
    the new key's row is a move from the old one. Images are kept as the changes hold them (never mutated)."""
    out: dict[TableId, TableChanges] = {}
    shapes: dict[TableId, _Shape] = {}
    table, net, shape = None, None, None
    for change in changes:
        if change.table is not table:  # consecutive changes mostly share their table: look it up once
            table = change.table
            net = out.get(table)
            if net is None:
                net = out[table] = TableChanges(table)
            shape = shapes.get(table)
            if shape is None:
                shape = shapes[table] = _Shape(schemas[table])
        net.events += 1
        if change.op is Op.DELETE:
            net.delete(change.key)
            continue
        after = change.after
        if shape.excluded:  # source.exclude_columns
            after = {n: v for n, v in after.items() if n not in shape.excluded}
        full = after.keys() >= shape.names
        key = change.key
        if change.op is Op.INSERT:
            if not full:
                raise ShortInsert(
                    f"an INSERT into {change.table} at {change.position} carries no value for column(s) "
                    f"{', '.join(shape.missing(after))} of the table as recorded: the source table no longer has "
                    "them, or added them after this event (a first run records the tables as they are when it "
                    "starts, so a column added between the snapshot and the first run is missing from older row "
                    f"images)", f"a dropped column: restore it on the source; either way, {REPLAN_HINT}")
            if key not in net.rows and key not in net.deletes and key not in net.partial and key not in net.moves:
                net.fresh.add(key)
        elif change.op is Op.UPDATE and change.before is not None:
            old = old_key(change.before, shape.key)
            if old is not None and old != key:
                if not full:
                    net.move(old, key, after, change.position)
                    continue
                net.delete(old)
        net.put(key, after, full)
    return out


class _Shape:
    """What compaction asks of a table's schema for every change, worked out once per batch."""

    def __init__(self, schema: TableSchema) -> None:
        self.names = frozenset(c.name for c in schema.columns)
        self.excluded = frozenset(schema.excluded)
        self.key = schema.primary_key
        self._columns = [c.name for c in schema.columns]

    def missing(self, image: dict) -> list[str]:
        return [n for n in self._columns if n not in image]


def old_key(before: dict, key_columns: tuple[str, ...]) -> tuple | None:
    if len(key_columns) == 1:
        k = key_columns[0]
        return (before[k],) if k in before else None
    if not all(k in before for k in key_columns):
        return None
    return tuple([before[k] for k in key_columns])


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
