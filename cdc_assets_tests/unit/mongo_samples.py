"""Resume tokens and change events exactly as MongoDB's documentation prints them (origin next to each)."""
import datetime as dt
import uuid

from bson import ObjectId
from bson.int64 import Int64
from bson.timestamp import Timestamp

# https://www.mongodb.com/docs/manual/changeStreams/#resume-tokens-from-change-events (an insert event's `_id`;
# the same token is Debezium's SourceInfoTest CHANGE_RESUME_TOKEN_DATA), clusterTime Timestamp(1666193824, 1).
DOCS_EVENT_TOKEN = ("82635019A0000000012B042C0100296E5A1004AB1154ACACD849A48C61756D70D3B21F463C6F7065726174696F6E5479"
                    "7065003C696E736572740046646F63756D656E744B65790046645F69640064635019A078BE67426D7CF4D2000004")
DOCS_EVENT_TIME = (1666193824, 1)
# Same page, "Resume Tokens from getMore": cursor.postBatchResumeToken at operationTime Timestamp(1666275705, 1).
DOCS_GETMORE_TOKEN = "8263515979000000022B0429296E1404"
# Same page, "Resume Tokens from aggregate": postBatchResumeToken at operationTime Timestamp(1666277036, 1).
DOCS_AGGREGATE_TOKEN = "8263515EAC000000022B0429296E1404"
# MongoDB community forum, "Change stream resume token long form and short form" (t/314845): an insert event at
# clusterTime Timestamp(1741186978, 25), then the short (high-water-mark) token the same stream returned next.
FORUM_EVENT_TOKEN = ("8267C867A2000000192B042C0100296E5A1004D3284E04D8914467A2160201812E4C4C463C6F7065726174696F6E54"
                     "797065003C696E736572740046646F63756D656E744B65790046645F6964006467C867A2FB1CBCD579F4E4DE000004")
FORUM_EVENT_TIME = (1741186978, 25)
FORUM_HIGH_WATER_TOKEN = "8267C867A3000000012B0429296E1404"

# The docs' insert event (same changeStreams page), as pymongo decodes it.
DOCS_INSERT = {
    "_id": {"_data": DOCS_EVENT_TOKEN},
    "operationType": "insert",
    "clusterTime": Timestamp(1666193824, 1),
    "collectionUUID": uuid.UUID("ab1154ac-acd8-49a4-8c61-756d70d3b21f"),
    "wallTime": dt.datetime(2022, 10, 19, 15, 37, 4, 604000),
    "fullDocument": {"_id": ObjectId("635019a078be67426d7cf4d2"), "name": "Giovanni Verga"},
    "ns": {"db": "test", "coll": "names"},
    "documentKey": {"_id": ObjectId("635019a078be67426d7cf4d2")},
}


def token(t: int, i: int, op_index: int = 0) -> str:
    """A token laid out like the docs' ones: 0x82 (KeyString Timestamp), t and i big-endian, then the head of the
    docs token's rest and an operation index, so events of one transaction (one cluster time) still ascend."""
    return f"82{t:08X}{i:08X}2B042C0100296E5A1004{op_index:04X}"


def event(kind: str, t: int, i: int, op_index: int = 0, **fields) -> dict:
    """An event of the shape "Change Events" documents (reference/change-events/*.txt in mongodb/docs)."""
    base = {"_id": {"_data": token(t, i, op_index)}, "operationType": kind, "clusterTime": Timestamp(t, i),
            "wallTime": dt.datetime.fromtimestamp(t, dt.timezone.utc).replace(tzinfo=None)}
    if kind != "invalidate":
        base["ns"] = {"db": "engineering", "coll": "users"}
    base.update(fields)
    return base


def in_txn(ev: dict, txn: int, lsid_id: str = "8c9f3b7e-5d4a-4b1e-9a2f-0c1d2e3f4a5b") -> dict:
    """`lsid` and `txnNumber` as "Change Events" describes them (lsid: {id: UUID, uid: BinData}; txnNumber: long)."""
    return {**ev, "lsid": {"id": uuid.UUID(lsid_id), "uid": b"\x00" * 32}, "txnNumber": Int64(txn)}
