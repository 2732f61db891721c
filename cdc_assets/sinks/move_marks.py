"""The newest position of a key change that a target table took as a move (`core.batches.Move`), written in the
transaction that applies it.

A batch replayed after a crash between the target's commit and a checkpoint stored outside the target (sqlite,
logfile, a named database) meets a target that is already past some of its moves; only the target can say so,
and only a record committed with the move can be trusted to. A move at or before the mark may be a replay; one
after it cannot be (the marks grow with the log). A batch that writes the table's rows before its mark flags it
(`MovePoint.replayed`): a replay in other batches than the committed ones may have put back under a moved row's
key what it held before, and a later batch's move is no longer sure of the row there. Written only for batches
with moves (and read by every batch of a table that has one): tables whose rows are never moved without their
unchanged TOASTed columns cost nothing. The table is created outside any transaction
(MySQL's DDL would commit the one open), when a batch with moves is prepared. A transaction in parts makes it at
its first part, moves or not: its later parts run in a target transaction that may have read already (a
savepoint's before-images), and MariaDB refuses a transaction a table created after it read (1412).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from cdc_assets.core.positions import Position, is_before, position_from_json
from cdc_assets.core.tables import TableId
from cdc_assets.errors import PositionsIncomparable

META = "cdc_assets_meta"
MARKS = "move_marks"


@dataclass(frozen=True, order=False)
class MovePoint:
    """Where a move lies in the log: at `position`, or, in a transaction handed out in parts (not positioned until
    its commit), somewhere just after `position`, its floor (`core.events.TransactionPart`): every transaction
    before it ends at or before the floor, and it ends after."""

    position: Position
    after: bool = False
    # A batch committed since the mark wrote the table's rows at a point before it (a replay cut into other batches
    # than the ones the target committed, or one after a reset back): a row under a key the mark's moves filled may
    # be what the key held before them again. Not part of the point: a mark equal to a move's covers it either way.
    replayed: bool = field(default=False, compare=False)

    def at_or_before(self, other: "MovePoint") -> bool:
        """Raises PositionsIncomparable."""
        if is_before(self.position, other.position):
            return True
        if is_before(other.position, self.position):
            return False
        return other.after or not self.after

    def to_json(self) -> str:
        return json.dumps({**self.position.to_json(), "after": self.after,
                           **({"replayed": True} if self.replayed else {})}, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> "MovePoint":
        data = json.loads(text)
        return MovePoint(position_from_json(data), bool(data.get("after")), bool(data.get("replayed")))


def point_of(position: Position | None, floor: Position | None) -> MovePoint | None:
    if position is not None:
        return MovePoint(position)
    return None if floor is None else MovePoint(floor, after=True)


class MoveMarks:
    def __init__(self, sink) -> None:
        self.sink = sink
        self.ready = False
        self._marked: set[str] | None = None  # the tables with a mark, read once a session

    def marked(self) -> set[str]:
        """The tables with a mark, read from the catalog the first time (none while the marks' table is missing),
        then kept by this sink's own writes: the task's lease leaves it the only writer while it runs."""
        if self._marked is None:
            with self.sink.catalog() as cur:
                cur.execute("SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                            (META, MARKS))
                present = cur.fetchone() is not None
                self.ready = self.ready or present
                if present:
                    cur.execute(f"SELECT {self.sink.q('target_table')} FROM {self._table()}")
                self._marked = {row[0] for row in cur.fetchall()} if present else set()
        return self._marked

    def _table(self) -> str:
        return self.sink.table_sql(TableId(META, MARKS))

    def ensure(self) -> None:
        if self.ready:
            return
        q, key = self.sink.q, self.sink.meta_key_type
        with self.sink.catalog() as cur:
            cur.execute(self.sink.create_namespace_sql(META))
            cur.execute(f"CREATE TABLE IF NOT EXISTS {self._table()} ({q('target_table')} {key} NOT NULL, "
                        f"{q('point')} {self.sink.text_type} NOT NULL, PRIMARY KEY ({q('target_table')}))")
        self.ready = True

    def read(self, cursor, table: TableId) -> MovePoint | None:
        cursor.execute(f"SELECT {self.sink.q('point')} FROM {self._table()} WHERE {self.sink.q('target_table')} = %s",
                       (str(table),))
        row = cursor.fetchone()
        return None if row is None else MovePoint.from_json(row[0])

    def write(self, cursor, table: TableId, mark: MovePoint) -> None:
        q = self.sink.q
        cursor.execute(f"DELETE FROM {self._table()} WHERE {q('target_table')} = %s", (str(table),))
        cursor.execute(f"INSERT INTO {self._table()} ({q('target_table')}, {q('point')}) VALUES (%s, %s)",
                       (str(table), mark.to_json()))
        if self._marked is not None:
            self._marked.add(str(table))

    def clear(self, cursor, table: TableId) -> None:
        """The target table was put back to an earlier state (a savepoint's rollback): its mark no longer holds."""
        cursor.execute(f"DELETE FROM {self._table()} WHERE {self.sink.q('target_table')} = %s", (str(table),))


def applied(mark: MovePoint | None, point: MovePoint | None) -> bool:
    """Did the target commit the move at `point` (or a later one) before, by its mark? Not when either is
    unknown, nor across another server's log (a failover), where the positions do not compare."""
    if mark is None or point is None:
        return False
    try:
        return point.at_or_before(mark)
    except PositionsIncomparable:
        return False


def newest(mark: MovePoint | None, points: list[MovePoint]) -> MovePoint | None:
    """The mark after a batch whose moves lie at `points`: the newest of them all."""
    best = mark
    for point in points:
        try:
            if best is None or best.at_or_before(point):
                best = point
        except PositionsIncomparable:  # another server's log: its moves are what the target holds now
            best = point
    return best
