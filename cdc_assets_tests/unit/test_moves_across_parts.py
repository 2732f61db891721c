"""A transaction handed out in parts, replayed part by part over a target that committed it before (a crash
between the target's commit and the checkpoint): its key moves take their unchanged TOASTed columns from the right
row although the replay's earlier parts rewrite the keys the moves use (`sinks.moves.plan_moves`)."""
import pytest

from cdc_assets.core.batches import MoveIncomplete, MovesAcrossParts, compact
from cdc_assets.core.events import Op, RowChange
from cdc_assets.core.positions import PgPosition
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.sinks.move_marks import MovePoint
from cdc_assets.sinks.moves import plan_moves

T = TableId("s", "t")
SCHEMA = TableSchema(T, (Column("id", Kind.INT, "integer"), Column("doc", Kind.STRING, "text"),
                         Column("n", Kind.INT, "integer")), ("id",))
FLOOR = PgPosition(1000)


class Marks:
    ready = True

    def __init__(self, mark):
        self.mark = mark

    def marked(self):
        return {str(T)} if self.mark is not None else set()

    def read(self, cursor, table):
        return self.mark

    def write(self, cursor, table, mark):
        self.mark = mark


def insert(key, doc):
    return RowChange(T, Op.INSERT, (key,), {"id": key, "doc": doc, "n": 0})


def move(old, new):  # a key change that leaves the TOASTed doc unchanged: the log leaves it out
    return RowChange(T, Op.UPDATE, (new,), {"id": new, "n": 0}, {"id": old})


def apply_part(target, changes, parts, marks, floor=FLOOR):
    """Apply one part (or, without `parts`, a batch) to `target` (key -> row) the way the SQL sinks do."""
    [net] = compact(changes, {T: SCHEMA}).values()
    net.floor, net.parts, net.last = (floor, parts, None) if parts is not None else (None, None, changes[-1].position)
    moves = plan_moves(None, SCHEMA, net, marks, lambda _c, _s, key: target.get(key), "postgresql://target")
    for key in [*net.deletes, *net.rows, *moves.copies]:
        target.pop(key, None)
    for key, row in net.rows.items():
        target[key] = (row["id"], row["doc"], row["n"])
    for key, row in moves.copies.items():
        target[key] = row
    for key, columns in {**net.partial, **moves.updates}.items():
        row = dict(zip(("id", "doc", "n"), target[key]))
        target[key] = tuple({**row, **columns}.values())


def replay(target, parts_changes):
    parts, marks = MovesAcrossParts(), Marks(MovePoint(FLOOR, after=True))  # the target committed the transaction
    for changes in parts_changes:
        apply_part(target, changes, parts, marks)
    return target


def test_rows_inserted_then_swapped_in_a_later_part_replay_exactly():
    """Part 1 inserts both rows, part 2 swaps their keys: the replay's part 1 puts back the rows as inserted."""
    committed = {(40,): (40, "B", 0), (50,): (50, "A", 0)}
    got = replay(committed, [[insert(40, "A"), insert(50, "B")], [move(40, 99), move(50, 40), move(99, 50)]])
    assert got == {(40,): (40, "B", 0), (50,): (50, "A", 0)}


def test_a_replayed_move_whose_new_key_an_earlier_part_wrote_from_a_row_not_written_whole_stops():
    """Part 1 moves the row of 40 away (the replay takes the row under the new key: the target is past it) and
    deletes 40; part 2 moves 50 into 40: 50's row in the target is a later one, and 40 holds nothing."""
    committed = {(60,): (60, "A", 0), (40,): (40, "B", 0)}
    with pytest.raises(MoveIncomplete, match=r"from key \(50,\) to \(40,\)"):
        replay(committed, [[move(40, 60)], [move(50, 40)]])


def test_columns_written_by_an_earlier_part_that_the_move_writes_again_leave_the_new_key_its_row():
    """Part 1 sets n of the row under 40 before the move; part 2 moves 50 into 40, writing n again."""
    committed = {(40,): (40, "B", 0)}
    got = replay(committed, [[RowChange(T, Op.UPDATE, (40,), {"id": 40, "n": 5}, {"id": 40})],
                             [RowChange(T, Op.DELETE, (40,), None, {"id": 40}), move(50, 40)]])
    assert got == {(40,): (40, "B", 0)}


def at(change, lsn):
    change.position = PgPosition(lsn)
    return change


def test_a_replay_cut_into_other_batches_flags_the_mark_and_a_later_batch_s_move_stops():
    """One batch committed the rewrite of 50 and the move of 40 into it (mark at 200); the replay commits the
    rewrite alone first: it puts back what 50 held before the move, and the row of 40 is gone."""
    committed, marks = {(50,): (50, "A", 0)}, Marks(MovePoint(PgPosition(200)))
    apply_part(committed, [at(insert(50, "xB"), 100)], None, marks)
    assert marks.mark.replayed and marks.mark == MovePoint(PgPosition(200))
    assert MovePoint.from_json(marks.mark.to_json()).replayed
    with pytest.raises(MoveIncomplete, match=r"from key \(40,\) to \(50,\).*a batch before this one"):
        apply_part(committed, [at(RowChange(T, Op.DELETE, (50,), None, {"id": 50}), 200), at(move(40, 50), 200)],
                   None, marks)


def test_a_batch_that_reaches_the_mark_leaves_it_unflagged():
    marks = Marks(MovePoint(PgPosition(200)))
    apply_part({}, [at(insert(60, "C"), 100), at(insert(61, "D"), 200)], None, marks)
    assert not marks.mark.replayed
