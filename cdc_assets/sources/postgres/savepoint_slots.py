"""A savepoint's hold on the PostgreSQL log: a copy of the task's slot, taken when the savepoint is created.

A logical slot cannot go back before its confirmed_flush_lsn. Rather than acknowledging the task's own slot no
further than the oldest savepoint (which would also stall its reader: psycopg2 confirms a keepalive's position
by itself unless the acknowledgement keeps pace, see feedback.py), each savepoint gets a slot of its own,
`pg_copy_logical_replication_slot(task slot, savepoint slot)`: same restart_lsn and confirmed position, never
read, so it keeps the WAL from the savepoint on. A rollback makes the task's slot a copy of it again. With
several targets each target's savepoint has its own slot, and the task keeps its one slot: rolling back one
target moves that slot back (only when it is ahead of the savepoint's), and the other targets' lanes skip what
they hold (engine/savepoints.py). The price is one slot of max_replication_slots per savepoint and target, and
the WAL from the oldest savepoint on; when
max_slot_wal_keep_size invalidates a savepoint's slot, that savepoint can no longer be rolled back to (the task's
own slot is not affected).
"""
from __future__ import annotations

import hashlib

from cdc_assets.core.positions import PgPosition
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.errors import CdcError
from cdc_assets.sources.postgres.slot import LOST, MAX_IDENTIFIER, _once_released, drop_slot, slot_name, slot_state


def savepoint_slot(task_id: str, owner: str, savepoint: str) -> str:
    """The slot of savepoint `savepoint` of `owner` (a target's position key: the task's id for its first target,
    `<task>.<target>` for the others): the same savepoint name on two targets is two slots, each named after the
    task's slot so that they are found beside it."""
    digest = hashlib.sha256(f"{owner}|{savepoint}".encode()).hexdigest()[:10]
    return f"{slot_name(task_id)[:MAX_IDENTIFIER - 14]}_sp_{digest}"


class PgSavepointSlots:
    """The savepoint slots of one target of a task (`owner`: its position key); the task's own slot, which every
    target's lane reads through, is one (`slot_name(task_id)`)."""

    def __init__(self, url: DbUrl, task_id: str, owner: str, log: object = None) -> None:  # the slot holds, not the Log
        self.url = url
        self.task_slot = slot_name(task_id)
        self.task_id, self.owner = task_id, owner

    def create(self, savepoint: str, position: PgPosition) -> dict:
        slot = savepoint_slot(self.task_id, self.owner, savepoint)
        conn = connect(self.url)
        try:
            if slot_state(conn, slot) is not None:
                drop_slot(conn, slot)  # left by a create that failed before its savepoint committed
            _once_released(conn, "SELECT pg_copy_logical_replication_slot(%s, %s)", (self.task_slot, slot))
            state = slot_state(conn, slot)
        finally:
            conn.close()
        return {"slot": slot, "confirmed_flush_lsn": str(state.confirmed_flush_lsn)}

    def check(self, savepoint: str, tag: dict, position: PgPosition) -> None:
        """Refuse when the savepoint's slot cannot give the log from `position` on."""
        conn = connect(self.url)
        try:
            state = slot_state(conn, tag["slot"])
        finally:
            conn.close()
        if state is None:
            raise CdcError(f"cannot roll back to savepoint {savepoint}: its replication slot {tag['slot']} is gone from "
                           f"{self.url}, so the log from {position} cannot be read again",
                           f"delete the savepoint (cdc-assets savepoint delete {savepoint}); to start over use "
                           "cdc-assets plan --replan")
        if state.wal_status == LOST:
            raise CdcError(f"cannot roll back to savepoint {savepoint}: its replication slot {tag['slot']} on {self.url} "
                           f"was invalidated (it held more WAL than max_slot_wal_keep_size allows): the log from "
                           f"{position} is gone", f"delete the savepoint (cdc-assets savepoint delete {savepoint}); "
                           "raise max_slot_wal_keep_size or keep fewer/younger savepoints")

    def restore(self, tag: dict) -> None:
        """Make the task's slot a copy of the savepoint's (idempotent: a crash in between is finished by
        running it again). A slot behind the checkpoint is harmless: decoding starts at the later of the two."""
        conn = connect(self.url)
        try:
            held = slot_state(conn, tag["slot"])
            task = slot_state(conn, self.task_slot)
            if task is not None and held is not None and task.confirmed_flush_lsn.lsn <= held.confirmed_flush_lsn.lsn:
                return
            if task is not None:
                drop_slot(conn, self.task_slot)
            _once_released(conn, "SELECT pg_copy_logical_replication_slot(%s, %s)", (tag["slot"], self.task_slot))
        finally:
            conn.close()

    def repair(self, tag: dict) -> None:
        """After a crash inside `restore`: the task's slot may be missing (dropped, not copied yet)."""
        conn = connect(self.url)
        try:
            missing = slot_state(conn, self.task_slot) is None
        finally:
            conn.close()
        if missing:
            self.restore(tag)

    def drop(self, tag: dict) -> None:
        conn = connect(self.url)
        try:
            drop_slot(conn, tag["slot"])
        finally:
            conn.close()

    def describe(self) -> str:
        return "a replication slot per savepoint holds the WAL from the savepoint on"
