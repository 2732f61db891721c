"""What the change-stream reader yields, fed events shaped as "Change Events" documents them and the quiet moments
(empty getMores with their postBatchResumeToken) a stream has: transactions, schema changes for drop / rename /
invalidate, Idle with and without a resume point, and the end of a bounded read. Plus how a resume point that left
the oplog reads to the user (pymongo's OperationFailure with the server's code, as MongoDB sends it)."""
import pytest
from bson.objectid import ObjectId
from pymongo.errors import OperationFailure

from cdc_assets.core.events import Idle, SchemaChange, SchemaChangeKind, Transaction, TransactionPart
from cdc_assets.core.positions import MongoPosition
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import PositionLost
from cdc_assets.sources.mongodb import log as mongo_log
from cdc_assets.sources.mongodb.changes import position_of, position_from_token
from cdc_assets.sources.mongodb.collections import parse_collection
from cdc_assets.sources.mongodb.follow import Follower
from cdc_assets.sources.mongodb.server import history_kept
from cdc_assets_tests.unit.mongo_samples import event, in_txn, token

USERS = TableId("engineering", "users")
SPECS = {USERS: parse_collection("engineering.users", {"fields": {"_id": "objectid", "name": "string"}})}
START = MongoPosition(token(1700000000, 1), (1700000000, 1))


def insert(t: int, i: int, n: int, op_index: int = 0) -> dict:
    oid = ObjectId(f"{n:024x}")
    return event("insert", t, i, op_index, documentKey={"_id": oid}, fullDocument={"_id": oid, "name": f"u{n}"})


def mark(t: int, i: int) -> MongoPosition:
    """A high-water-mark token (postBatchResumeToken) at cluster time (t, i), shaped as the docs' getMore one."""
    return position_from_token({"_data": f"82{t:08X}{i:08X}2B0429296E1404"})


def items_of(follower: Follower, feed: list) -> tuple[list, bool]:
    out, done = [], False
    for what in feed:
        step = follower.event(what) if isinstance(what, dict) else follower.quiet(*what)
        out += step.items
        done = step.done
        if done:
            break
    return out, done


@pytest.mark.parametrize("raw, table, ends_read", [
    (event("drop", 1700000100, 1), USERS, False),
    (event("rename", 1700000100, 1, to={"db": "engineering", "coll": "people"}), USERS, False),
    ({**event("dropDatabase", 1700000100, 1), "ns": {"db": "engineering"}}, None, False),
    (event("invalidate", 1700000100, 2), None, True),
])
def test_drop_rename_drop_database_and_invalidate_are_schema_changes_of_kind_other(raw, table, ends_read):
    follower = Follower(SPECS, START, None)
    out, done = items_of(follower, [insert(1700000050, 1, 1), raw, insert(1700000200, 1, 2)])
    assert isinstance(out[0], Transaction)
    change = out[1]
    assert isinstance(change, SchemaChange) and change.kind is SchemaChangeKind.OTHER and change.table == table
    assert change.position == position_of(raw) and raw["operationType"] in change.statement
    assert done == ends_read  # an invalidate closes the stream: nothing after it is read
    assert len(out) == (2 if ends_read else 3)
    assert follower.reported == (position_of(raw) if ends_read else out[-1].end)


def test_a_bounded_read_ends_with_the_transaction_reaching_stop_at():
    first, second, third = insert(1700000010, 1, 1), insert(1700000011, 1, 2), insert(1700000012, 1, 3)
    follower = Follower(SPECS, START, stop_at=position_of(second))
    out, done = items_of(follower, [first, second, third])
    assert done and [t.changes[0].key for t in out] == [("0" * 23 + "1",), ("0" * 23 + "2",)]


def test_a_bounded_read_stops_before_a_transaction_that_begins_after_stop_at():
    # Transactions of one session each: each completes only when the next one begins, and nothing follows the
    # fourth: the read must end on its first event, not wait for what would complete it.
    txns = [in_txn(insert(1700000010 + n, 1, n), n + 1) for n in range(4)]
    stop = mark(1700000012, 2)  # the stream's high-water mark right after the third commit
    follower = Follower(SPECS, START, stop_at=stop, part_events=1)
    out, done = items_of(follower, txns)
    assert done and [type(i) for i in out] == [Transaction, Transaction, Transaction, Idle]
    assert [t.end for t in out[:3]] == [position_of(e) for e in txns[:3]] and out[3] == Idle(stop)


def test_a_bounded_read_yields_nothing_positioned_after_stop_at():
    stop = mark(1700000011, 2)
    follower = Follower(SPECS, START, stop_at=stop)
    out, done = items_of(follower, [insert(1700000010, 1, 1), event("drop", 1700000012, 1)])
    assert done and isinstance(out[0], Transaction) and out[1:] == [Idle(stop)]  # the drop is the next read's


def test_a_bounded_read_past_stop_at_with_nothing_captured_ends_on_an_idle_at_the_mark():
    follower = Follower(SPECS, START, stop_at=mark(1700000020, 1))
    out, done = items_of(follower, [insert(1700000010, 1, 1), (mark(1700000015, 1), 0.1), (mark(1700000021, 1), 0.1)])
    assert done and isinstance(out[0], Transaction) and out[1:] == [Idle(mark(1700000021, 1))]


def test_quiet_stream_idles_at_its_mark_but_without_a_position_inside_a_transaction():
    follower = Follower(SPECS, START, None, idle_secs=1.0)
    assert follower.quiet(mark(1700000001, 1), 0.5).items == []  # not quiet long enough yet
    assert follower.quiet(mark(1700000001, 1), 1.0).items == [Idle(mark(1700000001, 1))]
    opened = in_txn(insert(1700000002, 1, 1, op_index=0), 7)
    assert follower.event(opened).items == []
    # A batch cut inside the transaction leaves the mark at its last event: no resume point to report.
    assert follower.quiet(position_of(opened), 1.0).items == [Idle(None)]
    done = follower.quiet(mark(1700000003, 1), 1.0).items
    assert isinstance(done[0], Transaction) and done[0].xid == 7 and done[1] == Idle(mark(1700000003, 1))


def test_parts_of_a_long_transaction_then_its_end():
    follower = Follower(SPECS, START, None, part_events=2)
    events = [in_txn(insert(1700000005, 1, n, op_index=n), 9) for n in range(5)]
    out, _ = items_of(follower, [*events, (mark(1700000006, 1), 0.0)])
    assert [type(i) for i in out] == [TransactionPart, TransactionPart, Transaction]
    assert [len(i.changes) for i in out] == [2, 2, 1] and out[-1].end == position_of(events[-1])


@pytest.mark.parametrize("code, name", [(286, "ChangeStreamHistoryLost"), (280, "ChangeStreamFatalError")])
def test_an_expired_resume_token_is_position_lost_naming_collection_position_server_and_way_out(code, name):
    url = DbUrl.parse("mongodb://cdc:s3cret@db1:27017,db2:27017/?replicaSet=rs0")
    failure = OperationFailure("Resume of change stream was not possible, as the resume point may no longer be in "
                               "the oplog.", code, {"ok": 0, "code": code, "codeName": name})
    with pytest.raises(PositionLost) as caught:
        with mongo_log._server_named(url), history_kept([USERS], START):
            raise failure
    message = caught.value.message
    assert "engineering.users" in message and START.resume_token in message and name in message
    assert "db1:27017,db2:27017" in message and "s3cret" not in str(caught.value)
    assert "cdc-assets plan --replan" in caught.value.hint


def test_distance_is_seconds_of_cluster_time_never_negative():
    log = mongo_log.MongoLog(DbUrl.parse("mongodb://db1:27017/"), "t")
    assert log.distance(mark(1700000000, 5), mark(1700000090, 1)) == 90
    assert log.distance(mark(1700000090, 1), mark(1700000000, 5)) == 0
