"""The MongoDB source against a real replica set (CDC_TEST_MONGO_URL): change streams, positions, splits.

No MongoDB server can be installed on the project's machines, so these run only where a replica set is offered
(docker/compose.yaml starts one) and are skipped with the reason otherwise. Written by reading pymongo's API.
"""
import time

import pytest
from bson.objectid import ObjectId
from pymongo import MongoClient, WriteConcern

from cdc_assets.core.events import Op, Transaction
from cdc_assets.core.positions import MongoPosition, is_before
from cdc_assets.core.tables import TableId
from cdc_assets.errors import PositionLost
from cdc_assets.sources.mongodb.changes import CollectionEnded, position_of
from cdc_assets.sources.mongodb.collections import parse_collection
from cdc_assets.sources.mongodb.server import (
    current_position, high_water, next_event, open_stream, plan_collection, read_split)
from cdc_assets.sources.mongodb.transactions import TransactionAssembler
from cdc_assets_tests.support import MONGO_URL, mongo

pytestmark = mongo


@pytest.fixture(scope="module")
def client():
    client = MongoClient(MONGO_URL, serverSelectionTimeoutMS=10_000)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def users(client, unique_name):
    table = TableId(unique_name, "users")
    client[table.namespace].create_collection(table.name)
    try:
        yield table
    finally:
        client.drop_database(table.namespace)


def read_outputs(stream, assembler: TransactionAssembler, tables: list[TableId], wanted: int, seconds: float = 30):
    """Feed the stream to the assembler until `wanted` outputs came out (idling hands it the high-water mark)."""
    out, deadline = [], time.monotonic() + seconds
    while len(out) < wanted and time.monotonic() < deadline:
        event = next_event(stream, tables, None)
        if event is None:
            mark = high_water(stream)
            out += assembler.idle(mark) if mark else []
        else:
            out += assembler.add(event)
    return out


def events(stream, tables: list[TableId], wanted: int, seconds: float = 30) -> list[dict]:
    out, deadline = [], time.monotonic() + seconds
    while len(out) < wanted and time.monotonic() < deadline:
        event = next_event(stream, tables, None)
        if event is not None:
            out.append(event)
    return out


def majority(client, table: TableId):
    """Writes acknowledged once majority-committed: what an updateLookup reads."""
    return client[table.namespace].get_collection(table.name, write_concern=WriteConcern("majority"))


def test_inserts_updates_deletes_and_a_transaction_arrive_as_row_changes_and_transactions(client, users):
    spec = parse_collection(str(users), {"fields": {"_id": "string", "name": "string", "n": "int"}})
    assembler = TransactionAssembler({users: spec})
    coll = majority(client, users)
    start = current_position(client, [users])
    with open_stream(client, [users], resume_after=start) as stream:
        a = coll.insert_one({"name": "a", "n": 1}).inserted_id
        coll.update_one({"_id": a}, {"$set": {"n": 2}})
        with client.start_session() as session:
            session.with_transaction(lambda s: (coll.insert_one({"name": "b", "n": 3}, session=s),
                                                coll.insert_one({"name": "c", "n": 4}, session=s)))
        out = read_outputs(stream, assembler, [users], wanted=3)
        coll.delete_one({"_id": a})
        out += read_outputs(stream, assembler, [users], wanted=1)
    assert all(isinstance(t, Transaction) for t in out)
    assert [[(c.op, c.after and c.after["name"]) for c in t.changes] for t in out] == [
        [(Op.INSERT, "a")], [(Op.UPDATE, "a")], [(Op.INSERT, "b"), (Op.INSERT, "c")], [(Op.DELETE, None)]]
    assert out[1].changes[0].after["n"] == 2 and out[3].changes[0].key == (str(a),)
    assert out[2].xid is not None and out[0].xid is None
    ends = [t.end for t in out]
    assert all(is_before(x, y) for x, y in zip([start, *ends], ends))  # tokens sort in event order


def test_an_update_whose_document_was_deleted_before_the_lookup_writes_nothing_and_the_delete_follows(client, users):
    spec = parse_collection(str(users), {"fields": {"_id": "string", "n": "int"}})
    assembler = TransactionAssembler({users: spec})
    coll = majority(client, users)
    start = current_position(client, [users])
    a = coll.insert_one({"n": 1}).inserted_id
    coll.update_one({"_id": a}, {"$set": {"n": 2}})
    coll.delete_one({"_id": a})
    with open_stream(client, [users], resume_after=start) as stream:  # looks up after the delete
        out = read_outputs(stream, assembler, [users], wanted=3)
    assert [[c.op for c in t.changes] for t in out] == [[Op.INSERT], [], [Op.DELETE]]


def test_a_stream_resumed_after_a_position_returns_only_later_events(client, users):
    coll = client[users.namespace][users.name]
    start = current_position(client, [users])
    coll.insert_many([{"_id": i} for i in range(3)])
    with open_stream(client, [users], resume_after=start) as stream:
        first = events(stream, [users], 1)[0]
    with open_stream(client, [users], resume_after=position_of(first)) as stream:
        later = events(stream, [users], 2)
    assert [e["documentKey"]["_id"] for e in later] == [1, 2]


def test_a_position_the_oplog_no_longer_holds_is_position_lost_with_the_way_out(client, users):
    with pytest.raises(PositionLost) as caught:
        with open_stream(client, [users], start_at=(1, 1)) as stream:
            next_event(stream, [users], (1, 1))
    assert str(users) in str(caught.value) and "cdc-assets plan --replan" in caught.value.hint
    gone = MongoPosition(f"82{1:08X}{1:08X}2B0429296E1404", (1, 1))  # the docs' high-water token layout, t=1
    with pytest.raises(PositionLost):
        with open_stream(client, [users], resume_after=gone) as stream:
            next_event(stream, [users], gone)


def test_dropping_the_collection_ends_the_stream_with_a_signal(client, users):
    spec = parse_collection(str(users), {})
    assembler = TransactionAssembler({users: spec})
    start = current_position(client, [users])
    with open_stream(client, [users], resume_after=start) as stream:
        client[users.namespace].drop_collection(users.name)
        out = read_outputs(stream, assembler, [users], wanted=1)
    assert isinstance(out[0], CollectionEnded) and out[0].event == "drop" and out[0].table == users


def test_splits_of_mixed_type_ids_read_every_document_exactly_once(client, users):
    coll = client[users.namespace][users.name]
    ids = [*range(-50, 50), *(f"key{i:03d}" for i in range(60)), *(ObjectId() for _ in range(60)),
           *({"k": i} for i in range(20)), 2.5, True]
    coll.insert_many([{"_id": i, "v": n} for n, i in enumerate(ids)])
    plan = plan_collection(client, users, 5, "now")
    assert len(plan.splits) > 1
    seen = [d["v"] for s in plan.splits for d in read_split(client, users, s.range, batch_size=17)]
    assert sorted(seen) == list(range(len(ids)))
