"""The newest position of a key change that a target table took as a move (`core.batches.Move`), written in the
transaction that applies it.

A batch replayed after a crash between the target's commit and a checkpoint stored outside the target (sqlite,
logfile, a named database) meets a target that is already past some of its moves; only the target can say so,
and only a record committed with the move can be trusted to. A move at or before the mark may be a replay; one
after it cannot be (the marks grow with the log). Written only for batches with moves: tables whose rows are
never moved without their unchanged TOASTed columns cost nothing. The table is created outside any transaction
(MySQL's DDL would commit the one open), when a batch with moves is prepared. A transaction in parts makes it at
its first part, moves or not: its later parts run in a target transaction that may have read already (a
savepoint's before-images), and MariaDB refuses a transaction a table created after it read (1412).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

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

    def at_or_before(self, other: "MovePoint") -> bool:
        """Raises PositionsIncomparable."""
        if is_before(self.position, other.position):
            return True
        if is_before(other.position, self.position):
            return False
        return other.after or not self.after

    def to_json(self) -> str:
        return json.dumps({**self.position.to_json(), "after": self.after}, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> "MovePoint":
        data = json.loads(text)
        return MovePoint(position_from_json(data), bool(data.get("after")))


def point_of(position: Position | None, floor: Position | None) -> MovePoint | None:
    if position is not None:
        return MovePoint(position)
    return None if floor is None else MovePoint(floor, after=True)


class MoveMarks:
    def __init__(self, sink) -> None:
        self.sink = sink
        self.ready = False

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
