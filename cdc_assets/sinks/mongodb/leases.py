"""Split leases in a MongoDB target: one run at a time snapshots a split (the SQL targets' advisory locks).

MongoDB has no session locks, so a lease is a document {_id: "task|split", owner, expires_at} taken with
findOneAndUpdate when it is free, expired, or already ours. Expiry stands in for "the connection died": a
SIGKILLed run's leases lapse after LEASE_SECS; a live run renews its own every LEASE_SECS / 3 on a thread. Times
are the server's ($$NOW), so clocks of different runners never matter.
"""
from __future__ import annotations

import threading
import time
import uuid

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from cdc_assets.core.urls import DbUrl
from cdc_assets.sinks.mongodb.server import META_DATABASE, connect
from cdc_assets.sinks.split_locks import POLL_SECS, SplitBusy

LEASE_SECS = 60
COLLECTION = "split_leases"


def take_filter(lease_id: str, owner: str) -> dict:
    """The lease is ours to take: nobody's, ours, or expired by the server's clock."""
    return {"_id": lease_id, "$or": [{"owner": owner}, {"$expr": {"$lt": ["$expires_at", "$$NOW"]}}]}


def take_update(owner: str) -> list[dict]:
    return [{"$set": {"owner": owner, "expires_at": {"$add": ["$$NOW", LEASE_SECS * 1000]}}}]


class MongoSplitLocks:
    def __init__(self, url: DbUrl, task_id: str) -> None:
        self.url = url
        self.task_id = task_id
        self.owner = uuid.uuid4().hex
        self.client = connect(url)
        self.leases = self.client[META_DATABASE][COLLECTION]
        self.held: set[str] = set()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _id(self, split_id: str) -> str:
        return f"{self.task_id}|{split_id}"

    def _try(self, split_id: str) -> bool:
        try:  # upsert: a free lease is created; one held by another run makes the insert collide on _id
            return self.leases.find_one_and_update(take_filter(self._id(split_id), self.owner),
                                                   take_update(self.owner), upsert=True,
                                                   return_document=ReturnDocument.AFTER) is not None
        except DuplicateKeyError:
            return False

    def acquire(self, split_ids: list[str], timeout: float) -> None:
        for split_id in sorted(split_ids):
            deadline = time.monotonic() + timeout
            while not self._try(split_id):
                if time.monotonic() >= deadline:
                    raise SplitBusy(
                        f"split {split_id} is being snapshotted by another run (its lease in {META_DATABASE}."
                        f"{COLLECTION} on {self.url} is held) for more than {timeout:.0f} s",
                        "wait for that run to finish or cancel it, then materialize the split again; a killed run's "
                        f"lease lapses after {LEASE_SECS} s")
                time.sleep(POLL_SECS)
            self.held.add(split_id)
        self._start_renewing()

    def _start_renewing(self) -> None:
        if self._renewer is None:
            self._renewer = threading.Thread(target=self._renew, name="cdc-split-leases", daemon=True)
            self._renewer.start()

    def _renew(self) -> None:
        while not self._stop.wait(LEASE_SECS / 3):
            for split_id in list(self.held):
                self._try(split_id)

    def release(self, split_ids: list[str]) -> None:
        for split_id in split_ids:
            if split_id in self.held:
                self.held.discard(split_id)
                self.leases.delete_one({"_id": self._id(split_id), "owner": self.owner})

    def close(self) -> None:
        self._stop.set()
        self.release(list(self.held))
        self.client.close()
