"""Pure logic of the incremental phase: compaction by key, the exactly-once filter, DDL classification."""
from types import SimpleNamespace

import pytest

from cdc_assets.core.batches import Move, ShortInsert, compact, split_key_change
from cdc_assets.core.events import Op, RowChange
from cdc_assets.core.positions import MysqlPosition, PgPosition
from cdc_assets.core.splits import SplitPlan
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.core.watermarks import TableWatermarks
from cdc_assets.engine.incremental import _Lane

T = TableId("shop", "t")
SCHEMA = TableSchema(T, (Column("id", Kind.INT, "int"), Column("a", Kind.STRING, "text"), Column("b", Kind.INT, "int")),
                     ("id",))


def change(op, key, after=None, before=None):
    return RowChange(T, op, (key,), after, before)


def test_last_change_wins_and_deletes_cancel_inserts():
    net = compact([
        change(Op.INSERT, 1, {"id": 1, "a": "x", "b": 1}),
        change(Op.UPDATE, 1, {"id": 1, "a": "y", "b": 2}, {"id": 1, "a": "x", "b": 1}),
        change(Op.INSERT, 2, {"id": 2, "a": "z", "b": 3}),
        change(Op.DELETE, 2, None, {"id": 2}),
        change(Op.DELETE, 3, None, {"id": 3}),
    ], {T: SCHEMA})[T]
    assert net.rows == {(1,): {"id": 1, "a": "y", "b": 2}}
    assert net.deletes == {(2,), (3,)} and net.partial == {}


def test_partial_updates_merge_into_full_rows_or_stay_partial():
    net = compact([
        change(Op.INSERT, 1, {"id": 1, "a": "x", "b": 1}),
        change(Op.UPDATE, 1, {"id": 1, "b": 5}),  # unchanged TOAST column a left out
        change(Op.UPDATE, 2, {"id": 2, "b": 7}),
        change(Op.UPDATE, 2, {"id": 2, "b": 8}),
    ], {T: SCHEMA})[T]
    assert net.rows == {(1,): {"id": 1, "a": "x", "b": 5}}
    assert net.partial == {(2,): {"id": 2, "b": 8}}


def test_a_key_change_deletes_the_old_key():
    moved = change(Op.UPDATE, 9, {"id": 9, "a": "m", "b": 0}, {"id": 4, "a": "m", "b": 0})
    net = compact([moved], {T: SCHEMA})[T]
    assert net.deletes == {(4,)} and (9,) in net.rows
    assert [p.op for p in split_key_change(moved, ("id",))] == [Op.DELETE, Op.INSERT]
    same = change(Op.UPDATE, 4, {"id": 4, "a": "n", "b": 0}, {"id": 4, "a": "m", "b": 0})
    assert split_key_change(same, ("id",)) == [same]


def moved(old, new, after):
    """A key change whose new image lacks column a (unchanged TOAST, REPLICA IDENTITY DEFAULT: the old key only)."""
    return change(Op.UPDATE, new, {"id": new, **after}, {"id": old})


def test_a_key_change_with_a_partial_image_moves_the_old_row():
    net = compact([moved(1, 2, {"b": 5})], {T: SCHEMA})[T]
    assert net.moves == {(2,): Move((1,), {"id": 2, "b": 5})} and net.deletes == {(1,)}
    assert net.rows == {} and net.partial == {}


def test_moves_fold_like_sequential_application():
    net = compact([
        change(Op.INSERT, 1, {"id": 1, "a": "x", "b": 1}), moved(1, 2, {"b": 2}),  # old row in the batch: full
        change(Op.DELETE, 4, None, {"id": 4}), moved(3, 4, {"b": 3}),  # new key deleted earlier: a move still
        change(Op.UPDATE, 5, {"id": 5, "b": 0}), moved(5, 6, {"b": 6}), moved(6, 7, {}),  # partial, then a chain
        change(Op.UPDATE, 7, {"id": 7, "b": 9}),  # a later partial update of the new key
        moved(8, 99, {}), moved(9, 8, {}), moved(99, 9, {}),  # a swap through a third key
        moved(10, 11, {}), change(Op.UPDATE, 11, {"id": 11, "a": "f", "b": 1}),  # then a full image
    ], {T: SCHEMA})[T]
    assert net.rows == {(2,): {"id": 2, "a": "x", "b": 2}, (11,): {"id": 11, "a": "f", "b": 1}}
    # vacated: the batch freed the new key before the move (the target may hold an older row there)
    assert net.moves == {(4,): Move((3,), {"id": 4, "b": 3}, vacated=True), (7,): Move((5,), {"id": 7, "b": 9}),
                         (8,): Move((9,), {"id": 8}, vacated=True), (9,): Move((8,), {"id": 9}, vacated=True)}
    assert net.deletes == {(1,), (3,), (5,), (6,), (10,), (99,)} and net.partial == {}


def test_an_insert_is_never_partial():
    with pytest.raises(ShortInsert, match=r"INSERT into shop.t at None carries no value for column\(s\) a.*replan"):
        compact([change(Op.INSERT, 1, {"id": 1, "b": 1})], {T: SCHEMA})


def test_compaction_keeps_tables_apart_counts_their_changes_and_drops_excluded_columns():
    other = TableId("shop", "u")
    narrow = TableSchema(other, (Column("k", Kind.INT, "int"), Column("v", Kind.INT, "int")), ("k",),
                         excluded=("secret",))
    net = compact([
        change(Op.INSERT, 1, {"id": 1, "a": "x", "b": 1}),
        RowChange(other, Op.INSERT, (1,), {"k": 1, "v": 1, "secret": "s"}),
        change(Op.UPDATE, 1, {"id": 1, "a": "y", "b": 2, "extra": 0}, {"id": 1, "a": "x", "b": 1}),  # a full image
        RowChange(TableId("shop", "u"), Op.UPDATE, (1,), {"k": 1, "secret": "t"}),  # an equal TableId, not the same
        change(Op.DELETE, 2, None, {"id": 2}),
    ], {T: SCHEMA, other: narrow})
    assert net[T].rows == {(1,): {"id": 1, "a": "y", "b": 2, "extra": 0}} and net[T].deletes == {(2,)}
    assert net[other].rows == {(1,): {"k": 1, "v": 1}} and net[other].partial == {}  # merged into the full row
    assert (net[T].events, net[other].events) == (3, 2)


def test_split_high_watermarks_decide_what_the_snapshot_holds():
    plan = SplitPlan(T, "id", "int", (100, 200), (1, 1, 1), "now")
    highs = {0: MysqlPosition("b.000001", 500), 1: MysqlPosition("b.000001", 900), 2: MysqlPosition("b.000002", 10)}
    w = TableWatermarks(plan, highs)
    assert w.holds(50, MysqlPosition("b.000001", 500)) and not w.holds(50, MysqlPosition("b.000001", 501))
    assert w.holds(150, MysqlPosition("b.000001", 800)) and w.holds(100, MysqlPosition("b.000001", 900))
    assert w.holds(250, MysqlPosition("b.000001", 9999))  # an earlier file is before the split's high watermark
    assert not w.plain(MysqlPosition("b.000001", 9999)) and w.plain(MysqlPosition("b.000002", 10))
    assert not w.holds(250, MysqlPosition("b.000002", 11))


def test_the_lag_is_reported_in_the_source_logs_own_unit():
    from cdc_assets.engine.incremental import SyncReport
    from cdc_assets.sources.mongodb.log import MongoLog
    from cdc_assets.sources.postgres.log import PostgresLog

    assert "lag unknown, 7 s of log" in " ".join(SyncReport(lag_bytes=7, lag_unit=MongoLog.distance_unit).lines())
    assert "lag unknown, 7 bytes of log" in " ".join(SyncReport(lag_bytes=7, lag_unit=PostgresLog.distance_unit).lines())


def test_fresh_keys_are_the_keys_a_batch_inserts_first():
    """A sink may insert a fresh key's row without looking for it: only a key whose first change in the batch is
    an INSERT is fresh, and it stops being fresh when the batch deletes it or moves it away."""
    net = compact([
        change(Op.INSERT, 1, {"id": 1, "a": "x", "b": 1}),
        change(Op.UPDATE, 1, {"id": 1, "b": 2}),  # a partial update of a fresh row: still fresh, still full
        change(Op.UPDATE, 2, {"id": 2, "a": "y", "b": 2}),  # in the target already
        change(Op.DELETE, 3, None, {"id": 3}), change(Op.INSERT, 3, {"id": 3, "a": "z", "b": 3}),
        change(Op.INSERT, 4, {"id": 4, "a": "w", "b": 4}), change(Op.DELETE, 4, None, {"id": 4}),
        change(Op.INSERT, 5, {"id": 5, "a": "v", "b": 5}),
        change(Op.UPDATE, 6, {"id": 6, "a": "v", "b": 5}, {"id": 5, "a": "v", "b": 5}),  # 5 moves to 6
        change(Op.INSERT, 7, {"id": 7, "a": "u", "b": 7}), moved(7, 8, {"b": 8}),  # a partial image: a move
        moved(20, 9, {"b": 9}), change(Op.UPDATE, 9, {"id": 9, "a": "t", "b": 9}),  # a move, then a full image
        change(Op.INSERT, 10, {"id": 10, "a": "s", "b": 10}),
    ], {T: SCHEMA})[T]
    assert net.fresh == {(1,), (10,)}
    assert net.rows.keys() == {(1,), (2,), (3,), (6,), (8,), (9,), (10,)} and net.rows[(1,)]["a"] == "x"


def test_a_batch_past_the_snapshot_horizon_replays_nothing_it_read():
    """`replaying_until` (the table's largest split high watermark) goes with a batch only while the batch may
    replay changes the snapshot read: a batch whose first change lies after it gets None, so a sink may take the
    fresh rows' short way (sinks/postgres.py) and no move is judged against the snapshot."""
    lane = SimpleNamespace(horizons={T: MysqlPosition("b.000001", 900, server="1")})
    until = lambda table, first: _Lane._replaying_until(lane, table, first)  # noqa: E731
    horizon = lane.horizons[T]
    assert until(T, MysqlPosition("b.000001", 500, server="1")) == horizon
    assert until(T, MysqlPosition("b.000001", 900, server="1")) == horizon  # at the horizon: the snapshot may hold it
    assert until(T, MysqlPosition("b.000001", 901, server="1")) is None
    assert until(T, MysqlPosition("b.000002", 4, server="1")) is None
    assert until(T, None) == horizon  # a part of a huge transaction: not positioned yet
    assert until(TableId("shop", "other"), MysqlPosition("b.000002", 4, server="1")) is None  # no horizon
    assert until(T, MysqlPosition("b.000009", 4, server="2")) == horizon  # another server's: not ordered


def test_a_part_not_positioned_yet_is_judged_by_its_floor():
    """A PostgreSQL transaction part's changes get their position at the commit, which lies after the part's floor:
    the floor tells whether the part may replay what the snapshot read. Positioned changes go by their own."""
    lane = SimpleNamespace(schemas={T: SCHEMA}, horizons={T: PgPosition(1000)}, pacer=None, _parts=None,
                           position=PgPosition(1),
                           rt=SimpleNamespace(sink=SimpleNamespace(prepare_changes=lambda schema, changes: None,
                                                                   column_capacities=lambda table: {})))
    lane._replaying_until = lambda table, first: _Lane._replaying_until(lane, table, first)
    unpositioned = [change(Op.INSERT, 1, {"id": 1, "a": "x", "b": 1})]
    assert _Lane._prepare(lane, unpositioned, PgPosition(1001))[T].replaying_until is None
    assert _Lane._prepare(lane, unpositioned, PgPosition(999))[T].replaying_until == PgPosition(1000)
    assert _Lane._prepare(lane, unpositioned)[T].replaying_until == PgPosition(1000)
    positioned = [RowChange(T, Op.INSERT, (1,), {"id": 1, "a": "x", "b": 1}, position=PgPosition(999))]
    assert _Lane._prepare(lane, positioned, PgPosition(1001))[T].replaying_until == PgPosition(1000)
