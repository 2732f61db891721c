"""Split leases: one run at a time snapshots a split, whoever launched it (a UI materialization during a
backfill, a retry while the first run still lives).

A lease is a session-level advisory lock in the target (PostgreSQL `pg_try_advisory_lock`, MySQL `GET_LOCK`),
held from before the low watermark until the split's commit settled. The target is where both runs would
write, and a session lock dies with its connection: a SIGKILLed run never leaves a split locked.
"""
from __future__ import annotations

import hashlib
import time

from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.errors import CdcError

POLL_SECS = 0.5


class SplitBusy(CdcError):
    """Another run holds the split's lease for longer than `snapshot.split_lock_timeout_secs`. Way out: wait for
    that run or cancel it, then materialize the split again (docs/concepts/snapshot.md)."""


def _key(task_id: str, split_id: str) -> bytes:
    return hashlib.sha256(f"cdc_assets|{task_id}|{split_id}".encode()).digest()


class SplitLocks:
    def __init__(self, url: DbUrl, task_id: str) -> None:
        self.url = url
        self.task_id = task_id
        self.conn = connect(url, autocommit=True)
        self.held: set[str] = set()

    def _try(self, split_id: str) -> bool:
        key = _key(self.task_id, split_id)
        with self.conn.cursor() as cur:
            if self.url.db_type == "postgres":
                cur.execute("SELECT pg_try_advisory_lock(%s)", (int.from_bytes(key[:8], "big", signed=True),))
            else:  # lock names are at most 64 characters
                cur.execute("SELECT GET_LOCK(%s, 0)", (f"cdc_assets:{key.hex()[:48]}",))
            return bool(cur.fetchone()[0])

    def _release(self, split_id: str) -> None:
        key = _key(self.task_id, split_id)
        with self.conn.cursor() as cur:
            if self.url.db_type == "postgres":
                cur.execute("SELECT pg_advisory_unlock(%s)", (int.from_bytes(key[:8], "big", signed=True),))
            else:
                cur.execute("SELECT RELEASE_LOCK(%s)", (f"cdc_assets:{key.hex()[:48]}",))

    def acquire(self, split_ids: list[str], timeout: float) -> None:
        """Take every lease, in split order (so two runs never wait on each other), waiting up to `timeout`
        seconds for each one another run holds."""
        for split_id in sorted(split_ids):
            deadline = time.monotonic() + timeout
            while not self._try(split_id):
                if time.monotonic() >= deadline:
                    raise SplitBusy(
                        f"split {split_id} is being snapshotted by another run (its lease in the target {self.url} "
                        f"is held) for more than {timeout:.0f} s",
                        "wait for that run to finish or cancel it, then materialize the split again; a finished "
                        "split is not read again")
                time.sleep(POLL_SECS)
            self.held.add(split_id)

    def release(self, split_ids: list[str]) -> None:
        for split_id in split_ids:
            if split_id in self.held:
                self._release(split_id)
                self.held.discard(split_id)

    def close(self) -> None:
        self.conn.close()  # a session's advisory locks end with it
        self.held.clear()
