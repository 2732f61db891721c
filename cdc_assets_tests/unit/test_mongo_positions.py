"""MongoDB positions: resume tokens from MongoDB's documentation order in event order and round-trip through JSON."""
import json

import pytest
from bson.binary import Binary

from cdc_assets.core.positions import MongoPosition, PgPosition, earliest, is_before, position_from_json
from cdc_assets.sources.mongodb.changes import position_from_token, position_of
from cdc_assets_tests.unit.mongo_samples import (
    DOCS_AGGREGATE_TOKEN, DOCS_EVENT_TIME, DOCS_EVENT_TOKEN, DOCS_GETMORE_TOKEN, DOCS_INSERT, FORUM_EVENT_TIME,
    FORUM_EVENT_TOKEN, FORUM_HIGH_WATER_TOKEN)


def test_a_documented_token_starts_with_the_cluster_time_of_its_event():
    assert MongoPosition(DOCS_EVENT_TOKEN, DOCS_EVENT_TIME).token_time == DOCS_EVENT_TIME
    assert MongoPosition(FORUM_EVENT_TOKEN, FORUM_EVENT_TIME).token_time == FORUM_EVENT_TIME
    assert position_of(DOCS_INSERT) == MongoPosition(DOCS_EVENT_TOKEN, DOCS_EVENT_TIME)


def test_documented_tokens_sort_in_the_order_their_streams_returned_them():
    event = MongoPosition(DOCS_EVENT_TOKEN, DOCS_EVENT_TIME)
    get_more = position_from_token({"_data": DOCS_GETMORE_TOKEN})  # Timestamp(1666275705, 2)
    aggregate = position_from_token({"_data": DOCS_AGGREGATE_TOKEN})  # Timestamp(1666277036, 2)
    assert is_before(event, get_more) and is_before(get_more, aggregate)
    assert not is_before(aggregate, event) and not is_before(event, event)
    assert earliest([aggregate, get_more, event]) == event
    # The forum's event token, then the high-water-mark token the same stream reported a second later.
    forum_event = MongoPosition(FORUM_EVENT_TOKEN, FORUM_EVENT_TIME)
    forum_high_water = position_from_token({"_data": FORUM_HIGH_WATER_TOKEN})
    assert forum_high_water.cluster_time == (1741186979, 1)
    assert is_before(forum_event, forum_high_water)
    assert sorted([forum_high_water, aggregate, forum_event, event], key=lambda p: p.sort_key()) == [
        event, aggregate, forum_event, forum_high_water]


def test_a_high_water_mark_at_an_events_cluster_time_sorts_before_that_event():
    # The docs' postBatchResumeToken layout (head, then 2B0429296E1404) moved to the docs event's cluster time: it
    # says "everything before this time", so the event at that time still comes after it; and a shorter token
    # that is a prefix of a longer one sorts first (bytes compare, not text of unequal length by accident).
    high_water = position_from_token({"_data": DOCS_EVENT_TOKEN[:18] + DOCS_AGGREGATE_TOKEN[18:]})
    event = MongoPosition(DOCS_EVENT_TOKEN, DOCS_EVENT_TIME)
    assert high_water.cluster_time == DOCS_EVENT_TIME
    assert is_before(high_water, event) and not is_before(event, high_water)
    assert is_before(position_from_token({"_data": DOCS_EVENT_TOKEN[:18]}), event)


def test_mongo_positions_round_trip_through_json_tagged_mongocdc():
    position = MongoPosition(DOCS_EVENT_TOKEN.lower(), DOCS_EVENT_TIME)
    data = json.loads(json.dumps(position.to_json()))
    assert data["type"] == "MongoCdc" and data["cluster_time"] == {"t": 1666193824, "i": 1}
    assert data["resume_token"] == DOCS_EVENT_TOKEN  # upper-case, as the server emits it
    assert position_from_json(data) == position
    assert DOCS_EVENT_TOKEN in str(position) and "1666193824.1" in str(position)


def test_tokens_that_do_not_sort_are_refused():
    with pytest.raises(ValueError, match="not a hex KeyString"):
        MongoPosition("not hex", (1, 1))
    with pytest.raises(ValueError, match="not a hex KeyString"):
        MongoPosition("", (1, 1))
    with pytest.raises(ValueError, match="not a hex KeyString"):  # hex, but no Timestamp head
        MongoPosition("3C696E7365727400", (1, 1))
    with pytest.raises(ValueError, match="not a hex KeyString"):  # a 3.6-era token: `_data` is BinData
        MongoPosition(Binary(bytes.fromhex(DOCS_EVENT_TOKEN), 0), DOCS_EVENT_TIME)


def test_mongo_positions_do_not_compare_with_other_logs():
    with pytest.raises(TypeError):
        is_before(MongoPosition(DOCS_EVENT_TOKEN, DOCS_EVENT_TIME), PgPosition(4))
