"""Change-stream events -> row changes, transactions and stream-ending signals.

Events are the examples of "Change Events" (mongodb/docs, source/reference/change-events/<event>.txt: the
`engineering.users` collection, `alice123`), with the tokens and cluster times those examples leave as
placeholders filled in the layout of the documented tokens (mongo_samples.token).
"""
import pytest
from bson.objectid import ObjectId

from cdc_assets.core.events import Op, SchemaChangeKind, Transaction, TransactionPart
from cdc_assets.core.tables import TableId
from cdc_assets.engine.schema_changes import SchemaChangeHalted
from cdc_assets.sources.mongodb.changes import (
    DEFAULT, UPDATE_LOOKUP, WHEN_AVAILABLE, ChangeNotApplicable, CollectionEnded, position_from_token, position_of,
    to_change)
from cdc_assets.sources.mongodb.collections import parse_collection
from cdc_assets.sources.mongodb.transactions import TransactionAssembler
from cdc_assets_tests.unit.mongo_samples import DOCS_INSERT, event, in_txn, token

USERS = TableId("engineering", "users")
ALICE = ObjectId("58a4eb4a30c75625e00d2820")  # update.txt
DELETED = ObjectId("599af247bb69cd89961c986d")  # delete.txt
FIELDS = parse_collection("engineering.users", {"fields": {
    "_id": "objectid", "name": "string", "userName": "string", "email": "string", "phoneNumber": "string"}})
WHOLE = parse_collection("engineering.users", {})
SPECS = {USERS: FIELDS}

UPDATE = event("update", 1700000000, 1, documentKey={"_id": ALICE}, updateDescription={
    "updatedFields": {"email": "alice@10gen.com"}, "removedFields": ["phoneNumber"],
    "truncatedArrays": [{"field": "vacation_time", "newSize": 36}]})
LOOKED_UP = {**UPDATE, "fullDocument": {"_id": ALICE, "name": "Alice", "userName": "alice123",
                                        "email": "alice@10gen.com", "team": "replication"}}


def test_insert_replace_and_delete_become_row_changes_at_their_own_position():
    insert = to_change(DOCS_INSERT, {TableId("test", "names"): parse_collection("test.names", {})})
    assert (insert.table, insert.op, insert.key) == (TableId("test", "names"), Op.INSERT, ("635019a078be67426d7cf4d2",))
    assert insert.after["document"] == '{"_id": {"$oid": "635019a078be67426d7cf4d2"}, "name": "Giovanni Verga"}'
    assert insert.position == position_of(DOCS_INSERT)
    replace = to_change(event("replace", 1700000000, 2, documentKey={"_id": DELETED}, fullDocument={
        "_id": DELETED, "userName": "alice123", "name": "Alice"}), SPECS)  # replace.txt
    assert replace.op is Op.UPDATE and replace.after == {"_id": str(DELETED), "name": "Alice", "userName": "alice123",
                                                         "email": None, "phoneNumber": None}
    delete = to_change(event("delete", 1700000000, 3, documentKey={"_id": DELETED}), SPECS)  # delete.txt
    assert (delete.op, delete.key, delete.after, delete.before) == (Op.DELETE, (str(DELETED),), None, None)


def test_an_update_with_its_looked_up_document_is_a_full_row():
    change = to_change(LOOKED_UP, SPECS)
    assert change.op is Op.UPDATE and change.key == (str(ALICE),)
    assert change.after == {"_id": str(ALICE), "name": "Alice", "userName": "alice123", "email": "alice@10gen.com",
                            "phoneNumber": None}


def test_pre_images_become_the_before_image():
    before = {"_id": ALICE, "name": "Alice", "userName": "alice123", "email": "a@old", "phoneNumber": "555"}
    change = to_change({**LOOKED_UP, "fullDocumentBeforeChange": before}, SPECS)
    assert change.before["email"] == "a@old" and change.after["email"] == "alice@10gen.com"
    delete = to_change(event("delete", 1700000000, 3, documentKey={"_id": ALICE}, fullDocumentBeforeChange=before),
                       SPECS)
    assert delete.before["phoneNumber"] == "555"


def test_an_update_whose_lookup_found_no_document_changes_nothing_its_later_delete_does():
    gone = {**UPDATE, "fullDocument": None}
    assert to_change(gone, SPECS, UPDATE_LOOKUP) is None
    assert to_change(gone, {USERS: WHOLE}, UPDATE_LOOKUP) is None


def test_an_update_without_full_document_is_partial_when_it_touches_only_declared_top_level_fields():
    change = to_change(UPDATE, SPECS, DEFAULT)  # vacation_time is not captured: its truncation does not matter
    assert change.op is Op.UPDATE
    assert change.after == {"_id": str(ALICE), "email": "alice@10gen.com", "phoneNumber": None}
    # a post-image that was not available (whenAvailable) is no proof of a delete: the same partial row
    assert to_change({**UPDATE, "fullDocument": None}, SPECS, WHEN_AVAILABLE).after == change.after


@pytest.mark.parametrize("spec, description, named", [
    (WHOLE, UPDATE["updateDescription"], "the whole document"),
    (parse_collection("engineering.users", {"fields": {"_id": "objectid", "vacation_time": "json"}}),
     UPDATE["updateDescription"], "vacation_time"),
    (parse_collection("engineering.users", {"fields": {"_id": "objectid", "address": "json"}}),
     {"updatedFields": {"address.city": "Palermo"}, "removedFields": []}, "address.city"),
])
def test_an_update_that_cannot_be_written_without_its_document_is_refused(spec, description, named):
    with pytest.raises(ChangeNotApplicable, match=named) as caught:
        to_change({**UPDATE, "updateDescription": description}, {USERS: spec}, DEFAULT)
    assert str(ALICE) in str(caught.value) and "engineering.users" in str(caught.value)
    assert "full_document='updateLookup'" in caught.value.hint


def test_collection_events_outside_the_captured_ones_change_nothing():
    teams = {"db": "engineering", "coll": "teams"}
    assert to_change({**LOOKED_UP, "ns": teams}, SPECS) is None
    assert to_change(event("createIndexes", 1700000000, 4), SPECS) is None
    assert to_change({**event("drop", 1700000000, 5), "ns": teams}, SPECS) is None
    assert to_change({**event("dropDatabase", 1700000000, 6), "ns": {"db": "crm"}}, SPECS) is None
    onto_users = {**event("rename", 1700000000, 7), "ns": teams, "to": {"db": "engineering", "coll": "users"}}
    replaced = to_change(onto_users, SPECS)  # dropTarget: the captured collection was replaced
    assert replaced.renamed_to == USERS and "engineering.users now holds what was engineering.teams" in replaced.hint


@pytest.mark.parametrize("raw, table, renamed, way_out", [
    (event("drop", 1700000100, 1), USERS, None, "remove the collection from source.collections"),
    (event("rename", 1700000100, 1, to={"db": "engineering", "coll": "people"}), USERS,
     TableId("engineering", "people"), "capture engineering.people instead"),
    ({**event("dropDatabase", 1700000100, 1), "ns": {"db": "engineering"}}, None, None, "source.collections"),
    (event("invalidate", 1700000100, 2), None, None, "cannot be resumed past an invalidate"),
])
def test_drop_rename_and_invalidate_stop_the_engine_with_the_way_out(raw, table, renamed, way_out):
    ended = to_change(raw, SPECS)
    assert isinstance(ended, CollectionEnded)
    assert (ended.table, ended.renamed_to, ended.position) == (table, renamed, position_of(raw))
    assert ended.ends_stream == (raw["operationType"] == "invalidate")
    assert way_out in ended.hint
    schema_change = ended.as_schema_change()
    assert (schema_change.kind, schema_change.added) == (SchemaChangeKind.OTHER, ())
    halted = SchemaChangeHalted(schema_change, "halt")
    assert str(ended.position) in str(halted) and raw["operationType"] in str(halted)


def _txn_events(txn: int, t: int, count: int) -> list[dict]:
    return [in_txn(event("insert", t, 1, op_index=n, documentKey={"_id": ObjectId(f"{txn:08x}{n:016x}")},
                         fullDocument={"_id": ObjectId(f"{txn:08x}{n:016x}"), "name": f"u{n}"}), txn)
            for n in range(count)]


def test_events_of_one_transaction_group_into_one_transaction_ending_at_its_last_event():
    assembler = TransactionAssembler(SPECS)
    first, second = _txn_events(1, 1700000200, 3), _txn_events(2, 1700000201, 2)
    out = [o for e in first for o in assembler.add(e)]
    assert out == []  # the stream has not shown the transaction's end yet
    out = assembler.add(second[0])
    assert len(out) == 1 and isinstance(out[0], Transaction)
    assert [c.key for c in out[0].changes] == [(str(e["documentKey"]["_id"]),) for e in first]
    assert out[0].end == position_of(first[-1]) and out[0].xid == 1
    plain = event("delete", 1700000202, 1, documentKey={"_id": DELETED})
    out = [o for e in [second[1], plain] for o in assembler.add(e)]
    assert [len(t.changes) for t in out] == [2, 1] and out[1].end == position_of(plain)  # no txn: its own


def test_a_transaction_completes_on_a_high_water_mark_past_it_not_on_a_token_equal_to_its_last_event():
    assembler = TransactionAssembler(SPECS)
    events = _txn_events(7, 1700000300, 2)
    for e in events:
        assembler.add(e)
    assert assembler.idle(position_of(events[-1])) == []  # a batch cut short: the next event may be the txn's
    done = assembler.idle(position_from_token({"_data": token(1700000301, 1)}))
    assert len(done) == 1 and len(done[0].changes) == 2


def test_a_long_transaction_is_handed_out_in_parts_floored_before_its_end():
    assembler = TransactionAssembler(SPECS, part_events=2)
    events = _txn_events(9, 1700000400, 5)
    out = [o for e in events for o in assembler.add(e)]
    assert [type(o) for o in out] == [TransactionPart, TransactionPart]
    assert [len(p.changes) for p in out] == [2, 2] and out[1].floor == position_of(events[3])
    tail = assembler.add(event("delete", 1700000401, 1, documentKey={"_id": DELETED}))
    assert len(tail[0].changes) == 1 and tail[0].end == position_of(events[-1])


def test_a_drop_ends_the_pending_transaction_first():
    assembler = TransactionAssembler(SPECS)
    events = _txn_events(3, 1700000500, 2)
    assembler.add(events[0])
    out = assembler.add(event("drop", 1700000501, 1))
    assert isinstance(out[0], Transaction) and isinstance(out[1], CollectionEnded)
