"""MongoDB change streams as the task's log: positions are resume tokens (MongoPosition), read with `startAfter`.

Nothing is held on the server for a reader: the oplog is a capped collection every member keeps for its own
replication, and a change stream only reads it. So `prepare` only checks, `acknowledge` releases nothing, and a
pause longer than the oplog window loses the position (PositionLost, the way out: `cdc-assets plan --replan`).

    read(start) ── open stream startAfter(start) ──> event ──> TransactionAssembler ──> Transaction / TransactionPart
                                                      │                                 CollectionEnded -> SchemaChange
                                                      └─ none for now ──> idle(postBatchResumeToken) ──> Idle(mark)

`startAfter` rather than `resumeAfter`: it also reopens after an invalidate event's token (MongoDB 4.2+), so a
task whose schema_change_policy ignores the invalidate can read on.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone

from pymongo import MongoClient

from cdc_assets.core.boundary import LogItem
from cdc_assets.core.events import Idle
from cdc_assets.core.headroom import Headroom, OplogFigures, oplog_headroom
from cdc_assets.core.positions import MongoPosition
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import PositionLost, TableError
from cdc_assets.sources.mongodb import server
from cdc_assets.sources.mongodb.changes import UPDATE_LOOKUP
from cdc_assets.sources.mongodb.collections import CollectionSpec, spec_from_schema
from cdc_assets.sources.mongodb.follow import Follower

IDLE_SECS = 1.0  # quiet this long: an Idle, so the engine can checkpoint and notice a stop request
AWAIT_MS = 250  # one empty getMore waits this long: close() is noticed within it


class MongoLog:
    distance_unit = "s"  # of cluster time: an oplog has no byte offsets a token could be compared by

    def __init__(self, url: DbUrl, task_id: str) -> None:
        self.url = url
        self.task_id = task_id

    def _client(self) -> MongoClient:
        return server.connect(self.url.render(masked=False))

    def prepare(self, tables: list[TableId], replan: bool = False) -> None:
        """Checks only (nothing to create, see the module docstring): every collection exists."""
        client = self._client()
        try:
            with server.reachable(self.url, self.url.password or ""):
                missing = [t for t in tables if not client[t.namespace].list_collection_names(filter={"name": t.name})]
        finally:
            client.close()
        if missing:
            raise TableError(f"collection(s) {', '.join(map(str, missing))} do not exist on {self.url}",
                             "check the database and collection names in source.collections")
        return None

    def reader(self, schemas: dict[TableId, TableSchema], purpose: str = "sync",
               source_text: bool = False) -> "MongoLogReader":  # BSON carries typed values, not texts
        return MongoLogReader(self.url, {t: spec_from_schema(s) for t, s in schemas.items()})

    def earliest(self) -> MongoPosition:
        """A position before the oldest oplog entry's events."""
        client = self._client()
        try:
            with server.reachable(self.url, self.url.password or ""):
                span = server.oplog_span(client)
                if span is None:
                    raise PositionLost(f"the oplog of {self.url} cannot be read (no access to local.oplog.rs)",
                                       "grant the user read on the local database, or use startup_mode latest")
                return server.position_at_time(client, [], (span[0].time, span[0].inc))
        finally:
            client.close()

    def position_at(self, when: datetime) -> MongoPosition:
        """A position before every event at or after `when` (naive = UTC), by `startAtOperationTime`."""
        moment = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
        client = self._client()
        try:
            with server.reachable(self.url, self.url.password or ""):
                return server.position_at_time(client, [], (int(moment.timestamp()), 0))
        finally:
            client.close()

    def headroom(self, needed: MongoPosition | None) -> Headroom:
        """How close the oplog is to dropping `needed` (core/headroom.oplog_headroom): nothing is held for the task."""
        client = self._client()
        try:
            with server.reachable(self.url, self.url.password or ""):
                span = server.oplog_span(client)
        finally:
            client.close()
        first, last = ((span[0].time, span[0].inc), (span[1].time, span[1].inc)) if span else (None, None)
        return oplog_headroom(OplogFigures(str(self.url), needed.cluster_time if needed is not None else None,
                                           first, last))

    def distance(self, a: MongoPosition, b: MongoPosition) -> int:
        """Seconds of cluster time from `a` to `b` (0 when `b` is not after `a`) -- not bytes: a resume token says
        when, not where in the oplog's bytes."""
        return max(0, b.cluster_time[0] - a.cluster_time[0])


class MongoLogReader:
    """One change stream at a time over the captured collections; `close()` may come from another thread."""

    def __init__(self, url: DbUrl, specs: dict[TableId, CollectionSpec], idle_secs: float = IDLE_SECS) -> None:
        self.url = url
        self.specs = specs
        self.tables = sorted(specs, key=str)
        self.idle_secs = idle_secs
        self._closed = threading.Event()

    def read(self, start: MongoPosition, stop_at: MongoPosition | None = None, part_events: int | None = None
             ) -> Iterator[LogItem]:
        client = server.connect(self.url.render(masked=False))
        try:
            with _server_named(self.url), server.reachable(self.url, self.url.password or ""):
                before_images = self._pre_images_on(client)
                stream = server.open_stream(client, self.tables, start_after=start, full_document=UPDATE_LOOKUP,
                                            before_images=before_images, max_await_ms=AWAIT_MS)
                with stream:
                    yield from self._follow(stream, start, stop_at, part_events)
        finally:
            client.close()

    def _follow(self, stream, start: MongoPosition, stop_at: MongoPosition | None, part_events: int | None
                ) -> Iterator[LogItem]:
        follower = Follower(self.specs, start, stop_at, part_events, self.idle_secs)
        quiet_since = time.monotonic()
        while not self._closed.is_set():
            event = server.next_event(stream, self.tables, follower.reported)
            if event is not None:
                step, quiet_since = follower.event(event), time.monotonic()
            else:
                step = follower.quiet(server.high_water(stream), time.monotonic() - quiet_since)
                if any(isinstance(i, Idle) for i in step.items):
                    quiet_since = time.monotonic()
            yield from step.items
            if step.done:
                return
        yield Idle()

    def _pre_images_on(self, client: MongoClient) -> bool:
        """Before images (fullDocumentBeforeChange) when every captured collection records them
        (changeStreamPreAndPostImages, MongoDB 6.0+); asking otherwise fails on older servers."""
        if not self.tables:
            return False
        for table in self.tables:
            infos = list(client[table.namespace].list_collections(filter={"name": table.name}))
            enabled = infos and infos[0].get("options", {}).get("changeStreamPreAndPostImages", {}).get("enabled")
            if not enabled:
                return False
        return True

    def acknowledge(self, position: MongoPosition) -> None:
        """Nothing to release: the oplog is kept by the replica set for itself, not for this reader."""

    def close(self) -> None:
        self._closed.set()


@contextmanager
def _server_named(url: DbUrl) -> Iterator[None]:
    """PositionLost from the stream (server.history_kept) with the server it was read from."""
    try:
        yield
    except PositionLost as exc:
        raise PositionLost(f"{exc.message} on {url}", exc.hint) from None
