"""The MongoDB server calls of the source: change streams, split boundaries, a split's documents.

Thin over pymongo; the logic lives in the pure modules beside it (splits, changes, transactions). A change stream
whose resume point has left the oplog fails with ChangeStreamHistoryLost (code 286) or, on older servers and
sharded clusters, ChangeStreamFatalError (280): both become PositionLost with the way out.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.change_stream import ChangeStream
from pymongo.collection import Collection
from pymongo.errors import ConnectionFailure, OperationFailure

from cdc_assets.core.positions import MongoPosition
from cdc_assets.core.splits import KeyRange, SplitPlan
from cdc_assets.core.tables import TableId
from cdc_assets.errors import LoginError, PositionLost, UnreachableError, scrub
from cdc_assets.sources.mongodb.changes import DEFAULT, UPDATE_LOOKUP, position_from_token
from cdc_assets.sources.mongodb.splits import plan_from_buckets, plan_from_sample, plan_from_split_keys, range_bounds

CHANGE_STREAM_HISTORY_LOST = 286
CHANGE_STREAM_FATAL_ERROR = 280
_LOST = (CHANGE_STREAM_HISTORY_LOST, CHANGE_STREAM_FATAL_ERROR)
_BUCKET_AUTO_LIMIT = 1_000_000  # beyond this many documents, sorting every _id costs more than a sample's guess


AUTHENTICATION_FAILED = 18
_SELECTION_TIMEOUT_MS = 10_000


def connect(url_text: str) -> MongoClient:
    """A client as every part of the source opens one: standard UUIDs (subtype 4 decodes as uuid.UUID, as values.py
    expects) and naive UTC datetimes. pymongo connects lazily: `ping` proves the server answers."""
    return MongoClient(url_text, uuidRepresentation="standard", tz_aware=False,
                       serverSelectionTimeoutMS=_SELECTION_TIMEOUT_MS)


@contextmanager
def reachable(url: object, password: str) -> Iterator[None]:
    """Connection and login failures as UnreachableError / LoginError naming the masked `url`."""
    try:
        yield
    except ConnectionFailure as exc:
        raise UnreachableError(f"MongoDB at {url} did not answer: {scrub(str(exc), password)[:300]}",
                               "check that the server runs, the hosts and options in the URL, and the network"
                               ) from None
    except OperationFailure as exc:
        if exc.code != AUTHENTICATION_FAILED:
            raise
        raise LoginError(f"MongoDB at {url} refused the login", "check the user, password and authSource in the URL"
                         ) from None


def collection(client: MongoClient, table: TableId) -> Collection:
    return client[table.namespace][table.name]


def stream_scope(client: MongoClient, tables: list[TableId]):
    """One database's stream when all tables share it (needs privileges on that database only), else the
    deployment's; filtered to the captured collections and the events that end them."""
    databases = {t.namespace for t in tables}
    captured = [{"ns.db": t.namespace, "ns.coll": t.name} for t in tables]
    dropped = {"operationType": "dropDatabase", "ns.db": {"$in": sorted(databases)}}
    pipeline = [{"$match": {"$or": [*captured, dropped, {"operationType": "invalidate"}]}}]  # invalidate has no ns
    if len(databases) == 1:
        return client[next(iter(databases))], pipeline
    return client, pipeline


@contextmanager
def history_kept(tables: list[TableId], position: object) -> Iterator[None]:
    try:
        yield
    except OperationFailure as exc:
        if exc.code not in _LOST:
            raise
        names = ", ".join(str(t) for t in tables)
        raise PositionLost(
            f"the change stream of {names} cannot resume from {position}: the oplog no longer holds it "
            f"(server error {exc.code} {exc.details.get('codeName', '') if exc.details else ''})",
            "re-plan and re-snapshot the task: cdc-assets plan --replan; then keep pauses shorter than the oplog "
            "window, or grow it (replSetResizeOplog, oplogMinRetentionHours)") from None


def open_stream(client: MongoClient, tables: list[TableId], *, resume_after: MongoPosition | None = None,
                start_after: MongoPosition | None = None, start_at: tuple[int, int] | None = None,
                full_document: str = UPDATE_LOOKUP, before_images: bool = False, batch_size: int | None = None,
                max_await_ms: int | None = None) -> ChangeStream:
    """A change stream over the captured collections, resumed after a position or started at a cluster time.
    `start_after` is `resume_after` that also accepts an invalidate event's token (MongoDB 4.2+), so a reader told
    to read on past an invalidate can. `before_images` asks for fullDocumentBeforeChange (the collections need
    changeStreamPreAndPostImages). `max_await_ms`: how long one empty getMore waits (server default 1 s)."""
    target, pipeline = stream_scope(client, tables)
    options: dict = {"full_document": None if full_document == DEFAULT else full_document,
                     "batch_size": batch_size, "max_await_time_ms": max_await_ms}
    if before_images:
        options["full_document_before_change"] = "whenAvailable"
    if resume_after is not None:
        options["resume_after"] = {"_data": resume_after.resume_token}
    elif start_after is not None:
        options["start_after"] = {"_data": start_after.resume_token}
    elif start_at is not None:
        options["start_at_operation_time"] = Timestamp(*start_at)
    with history_kept(tables, resume_after or start_after or start_at):
        return target.watch(pipeline, **options)


def next_event(stream: ChangeStream, tables: list[TableId], position: object) -> dict | None:
    """The next event, or None when the stream has nothing now (then `high_water(stream)` tells how far it got)."""
    with history_kept(tables, position):
        return stream.try_next()


def high_water(stream: ChangeStream) -> MongoPosition | None:
    token = stream.resume_token
    return position_from_token(token) if token else None


def current_position(client: MongoClient, tables: list[TableId]) -> MongoPosition:
    """The stream's position now: the postBatchResumeToken a freshly opened stream reports, before any event."""
    with open_stream(client, tables, full_document=DEFAULT) as stream:
        position = high_water(stream)
        while position is None:  # a server that gave no token with the opening batch gives one on getMore
            stream.try_next()
            position = high_water(stream)
        return position


def position_at_time(client: MongoClient, tables: list[TableId], time: tuple[int, int]) -> MongoPosition:
    """The high-water mark of a stream started at cluster time `time`: a position before every event at or after
    it. An empty first batch (batchSize 0) makes the server answer with the start point's postBatchResumeToken,
    which pymongo caches as the stream's resume token."""
    with open_stream(client, tables, start_at=time, full_document=DEFAULT, batch_size=0) as stream:
        position = high_water(stream)
    if position is None:  # a server before 4.0.7 sends no postBatchResumeToken: its tokens are not accepted anyway
        raise PositionLost(f"MongoDB gave no resume token for cluster time {time[0]}.{time[1]}",
                           "use MongoDB 4.2 or later (featureCompatibilityVersion >= 4.2)")
    return position


def oplog_span(client: MongoClient) -> tuple[Timestamp, Timestamp] | None:
    """The oldest and newest oplog entries' times; None without read access to `local`."""
    oplog = client.local["oplog.rs"]
    try:
        first = oplog.find({}, {"ts": 1}).sort("$natural", 1).limit(1).next()["ts"]
        last = oplog.find({}, {"ts": 1}).sort("$natural", -1).limit(1).next()["ts"]
    except (OperationFailure, StopIteration):
        return None
    return first, last


def plan_collection(client: MongoClient, table: TableId, splits: int, created_at: str) -> SplitPlan:
    """Split boundaries from splitVector when allowed, else $bucketAuto (up to a million documents), else $sample."""
    coll = collection(client, table)
    rows = coll.estimated_document_count()
    if splits <= 1 or rows == 0:
        return plan_from_buckets(table, [], created_at)
    try:
        chunk_mb = max(1, _size_mb(client, table) // splits)
        result = client[table.namespace].command("splitVector", f"{table}", keyPattern={"_id": 1},
                                                 maxChunkSize=chunk_mb)
        if result.get("splitKeys"):
            return plan_from_split_keys(table, result["splitKeys"], rows, created_at)
    except OperationFailure:
        pass  # not authorised (clusterManager role) or not offered (Atlas shared tiers): the aggregations next
    # (also when splitVector found no key: a collection smaller than one chunk, still cut as asked)
    if rows <= _BUCKET_AUTO_LIMIT:
        buckets = list(coll.aggregate([{"$bucketAuto": {"groupBy": "$_id", "buckets": splits}}], allowDiskUse=True))
        return plan_from_buckets(table, buckets, created_at)
    sample = coll.aggregate([{"$sample": {"size": min(rows, 100 * splits)}}, {"$project": {"_id": 1}}])
    return plan_from_sample(table, [d["_id"] for d in sample], splits, rows, created_at)


def _size_mb(client: MongoClient, table: TableId) -> int:
    stats = client[table.namespace].command("collStats", table.name)
    return int(stats.get("size", 0)) // (1024 * 1024)


def read_split(client: MongoClient, table: TableId, key_range: KeyRange, batch_size: int = 1000) -> Iterator[dict]:
    """The documents of one split, in `_id` order, along the `_id` index."""
    cursor = collection(client, table).find({}, batch_size=batch_size, **range_bounds(key_range))
    try:
        yield from cursor
    finally:
        cursor.close()
