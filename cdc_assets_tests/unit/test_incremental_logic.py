"""Pure logic of the incremental phase: compaction by key, the skip filter (exactly-once, tables ahead, a lane's
checkpoint), transactions in parts, what a batch may replay of the snapshot."""
import pytest

from cdc_assets.core.batches import Move, ShortInsert, TableChanges, compact, split_key_change
from cdc_assets.core.events import Idle, Op, RowChange, SchemaChange, Transaction, TransactionPart
from cdc_assets.core.positions import MysqlPosition, PgPosition
from cdc_assets.core.skip_filter import SkipFilter
from cdc_assets.core.splits import SplitPlan
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.core.transaction_parts import Tally, TransactionInParts
from cdc_assets.core.watermarks import TableWatermarks, batch_start, replaying_until

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
    fresh rows' short way (sinks/postgres_apply.py) and no move is judged against the snapshot."""
    horizons = {T: MysqlPosition("b.000001", 900, server="1")}
    until = lambda table, first: replaying_until(horizons, table, first)  # noqa: E731
    horizon = horizons[T]
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
    horizons = {T: PgPosition(1000)}
    until = lambda changes, floor=None: replaying_until(horizons, T, batch_start(changes, floor))  # noqa: E731
    unpositioned = [change(Op.INSERT, 1, {"id": 1, "a": "x", "b": 1})]
    assert until(unpositioned, PgPosition(1001)) is None
    assert until(unpositioned, PgPosition(999)) == PgPosition(1000)
    assert until(unpositioned) == PgPosition(1000)
    positioned = [RowChange(T, Op.INSERT, (1,), {"id": 1, "a": "x", "b": 1}, position=PgPosition(999))]
    assert until(positioned, PgPosition(1001)) == PgPosition(1000)
    assert batch_start([], None) is None


U = TableId("shop", "u")
SCHEMAS = {T: SCHEMA, U: TableSchema(U, (Column("k", Kind.INT, "int"),), ("k",))}


def tx(end, *changes):
    return Transaction(list(changes), PgPosition(end), commit_time=5.0, xid=end)


def row(table, key):
    return RowChange(table, Op.INSERT, (key,), {"id" if table == T else "k": key})


def test_a_lane_behind_the_session_skips_up_to_its_own_checkpoint():
    """The session reads from an earlier lane's checkpoint: this lane drops every item up to its own, then takes
    the log as the others do; its tables count as ahead up to its checkpoint meanwhile."""
    skip = SkipFilter({U: PgPosition(300)}, {})
    skip.behind(PgPosition(100), PgPosition(200), SCHEMAS)
    assert skip.ahead == {T: PgPosition(200), U: PgPosition(300)}
    assert skip.applied_before(tx(150, row(T, 1))) and skip.applied_before(tx(200, row(T, 1)))
    assert skip.applied_before(Idle(PgPosition(200))) and not skip.applied_before(Idle(None))
    assert not skip.applied_before(TransactionPart([row(T, 1)], PgPosition(190)))  # a part has no position
    assert skip.floor == PgPosition(200)
    assert not skip.applied_before(Idle(PgPosition(250))) and skip.floor == PgPosition(200)
    assert not skip.applied_before(tx(201, row(T, 1))) and skip.floor is None  # past it: as the others
    assert not skip.applied_before(tx(150, row(T, 1)))


def test_a_lane_at_the_session_start_skips_nothing_for_its_checkpoint():
    skip = SkipFilter({}, {})
    skip.behind(PgPosition(200), PgPosition(200), SCHEMAS)
    assert skip.floor is None and skip.ahead == {} and not skip.applied_before(tx(100, row(T, 1)))
    assert skip.keep(tx(100, row(T, 1)), SCHEMAS) == (tx(100, row(T, 1)), 0)


def test_tables_ahead_skip_what_they_applied_until_the_log_is_past_them():
    skip = SkipFilter({U: PgPosition(300)}, {})
    kept, skipped = skip.keep(tx(250, row(T, 1), row(U, 1), row(U, 2)), SCHEMAS)
    assert kept.changes == [row(T, 1)] and skipped == 2
    assert (kept.end, kept.commit_time, kept.xid) == (PgPosition(250), 5.0, 250)
    assert skip.may_skip(PgPosition(299)) and not skip.may_skip(PgPosition(300))
    assert skip.keep(tx(300, row(U, 3)), SCHEMAS) == (tx(300), 1)  # at its position: applied already
    assert skip.ahead == {}  # the log is past it
    whole = tx(301, row(U, 4))
    assert skip.keep(whole, SCHEMAS) == (whole, 0)


def test_a_table_ahead_leaves_out_its_ddl_up_to_where_it_joined():
    """A table that joined from its own snapshot was read and described after every DDL before its start."""
    skip = SkipFilter({U: PgPosition(300)}, {})
    assert skip.followed(SchemaChange(U, "ALTER TABLE u DROP COLUMN w", PgPosition(250)))
    assert skip.followed(SchemaChange(U, "CREATE TABLE u (id int)", PgPosition(300)))
    assert not skip.followed(SchemaChange(U, "ALTER TABLE u DROP COLUMN w", PgPosition(301)))
    assert not skip.followed(SchemaChange(T, "ALTER TABLE t DROP COLUMN b", PgPosition(250)))
    assert not skip.followed(SchemaChange(None, "DROP DATABASE shop", PgPosition(250)))


def test_a_checkpoint_forgets_the_tables_it_passed():
    skip = SkipFilter({T: PgPosition(300), U: PgPosition(500)}, {})
    skip.passed(PgPosition(300))
    assert skip.ahead == {U: PgPosition(500)}


def test_exactly_once_skips_what_the_snapshot_holds_key_by_key():
    """Each change is judged by its split's high watermark at its transaction's end; a key change counts as the
    delete of its old key and the insert of its new one; past the largest high watermark nothing is skipped."""
    plan = SplitPlan(T, "id", "int", (100,), (1, 1), "now")
    skip = SkipFilter({}, {T: TableWatermarks(plan, {0: PgPosition(500), 1: PgPosition(900)})})
    assert skip.may_skip(PgPosition(899)) and not skip.may_skip(PgPosition(900))
    move = change(Op.UPDATE, 150, {"id": 150, "a": "m", "b": 0}, {"id": 50, "a": "m", "b": 0})
    kept, skipped = skip.keep(tx(600, row(T, 50), row(T, 150), move, row(U, 1)), SCHEMAS)
    assert [(c.op, c.key) for c in kept.changes] == [(Op.INSERT, (50,)), (Op.DELETE, (50,)), (Op.INSERT, (1,))]
    assert skipped == 2  # 150 twice: its split's high watermark 900 is after 600
    assert skip.watermarks  # not past 900 yet
    untouched = tx(700, row(U, 2))
    assert skip.keep(untouched, SCHEMAS) == (untouched, 0)  # nothing skipped: the transaction as it came
    assert skip.keep(tx(900, row(T, 150)), SCHEMAS) == (tx(900), 1)  # at the high watermark: held
    assert skip.watermarks == {} and not skip.may_skip(PgPosition(10))  # past the largest: plain log mode
    plain = tx(901, row(T, 150))
    assert skip.keep(plain, SCHEMAS) == (plain, 0)


def test_a_transaction_in_parts_is_applied_part_by_part():
    parts = TransactionInParts(holding=False)
    first, second = [row(T, 1), row(T, 2)], [row(T, 3)]
    assert not parts.holding
    assert parts.take(TransactionPart(first, PgPosition(10))) == first
    assert parts.take(TransactionPart(second, PgPosition(10))) == second
    end = tx(20, row(T, 4))
    assert parts.end(end) is end  # the rest: its own changes, applied with the commit
    assert (parts.tally.transactions, parts.tally.commit_time) == (1, 5.0)


def test_a_transaction_in_parts_is_held_whole_while_the_filter_needs_its_end():
    parts = TransactionInParts(holding=True)
    assert parts.holding
    assert parts.take(TransactionPart([row(T, 1), row(T, 2)], PgPosition(10))) is None
    assert parts.take(TransactionPart([row(T, 3)], PgPosition(10))) is None
    whole = parts.end(tx(20, row(T, 4)))
    assert whole == tx(20, row(T, 1), row(T, 2), row(T, 3), row(T, 4))


def test_a_tally_counts_changes_rows_and_tables():
    tally = Tally(transactions=2)
    net = {T: TableChanges(T, rows={(1,): {}, (2,): {}}, deletes={(3,)}, events=4),
           U: TableChanges(U, rows={(1,): {}}, events=1)}
    tally.add(5, net)
    tally.add(2, {T: TableChanges(T, rows={(4,): {}}, events=2)})
    assert (tally.events, tally.rows, tally.per_table) == (7, 5, {"shop.t": 6, "shop.u": 1})
