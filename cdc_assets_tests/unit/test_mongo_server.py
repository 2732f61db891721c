"""The server module's pure parts: which stream it opens, and how a lost resume point reads to the user.

The server errors are pymongo's own OperationFailure with the code and reply MongoDB sends
(src/mongo/base/error_codes.yml: 286 ChangeStreamHistoryLost, 280 ChangeStreamFatalError).
"""
import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from cdc_assets.core.positions import MongoPosition
from cdc_assets.core.tables import TableId
from cdc_assets.errors import PositionLost
from cdc_assets.sources.mongodb.server import history_kept, stream_scope
from cdc_assets_tests.unit.mongo_samples import DOCS_EVENT_TIME, DOCS_EVENT_TOKEN

ORDERS, USERS, OTHER = TableId("shop", "orders"), TableId("shop", "users"), TableId("crm", "people")
POSITION = MongoPosition(DOCS_EVENT_TOKEN, DOCS_EVENT_TIME)


def failure(code: int, name: str) -> OperationFailure:
    return OperationFailure("Resume of change stream was not possible, as the resume point may no longer be in the "
                            "oplog.", code, {"ok": 0, "code": code, "codeName": name})


@pytest.mark.parametrize("code, name", [(286, "ChangeStreamHistoryLost"), (280, "ChangeStreamFatalError")])
def test_a_resume_point_gone_from_the_oplog_is_position_lost_naming_collections_position_and_way_out(code, name):
    with pytest.raises(PositionLost) as caught:
        with history_kept([ORDERS, USERS], POSITION):
            raise failure(code, name)
    message = str(caught.value)
    assert "shop.orders, shop.users" in message and DOCS_EVENT_TOKEN in message and name in message
    assert "cdc-assets plan --replan" in caught.value.hint and "oplog" in caught.value.hint


def test_other_server_errors_pass_through_unchanged():
    with pytest.raises(OperationFailure) as caught:
        with history_kept([ORDERS], POSITION):
            raise failure(13, "Unauthorized")
    assert caught.value.code == 13


def test_one_database_is_watched_alone_and_several_from_the_deployment():
    client = MongoClient("mongodb://127.0.0.1:1/", connect=False)  # never contacted: only names are built
    try:
        target, pipeline = stream_scope(client, [ORDERS, USERS])
        assert target.name == "shop"
        match = pipeline[0]["$match"]["$or"]
        assert {"ns.db": "shop", "ns.coll": "orders"} in match and {"operationType": "invalidate"} in match
        assert {"operationType": "dropDatabase", "ns.db": {"$in": ["shop"]}} in match
        target, pipeline = stream_scope(client, [ORDERS, OTHER])
        assert target is client
        assert {"operationType": "dropDatabase", "ns.db": {"$in": ["crm", "shop"]}} in pipeline[0]["$match"]["$or"]
    finally:
        client.close()
