"""Slot headroom: the figures `core.headroom.slot_headroom` decides on, from pg_replication_slots (PostgreSQL 13+
has wal_status and safe_wal_size)."""
from __future__ import annotations

from cdc_assets.core.headroom import Headroom, Level, SlotFigures, slot_headroom
from cdc_assets.core.positions import PgPosition
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect

_SQL = """
SELECT wal_status, (pg_current_wal_lsn() - restart_lsn)::bigint, safe_wal_size,
       (SELECT setting::bigint * CASE unit WHEN 'MB' THEN 1048576 WHEN 'kB' THEN 1024 ELSE 1 END
          FROM pg_settings WHERE name = 'max_slot_wal_keep_size')
FROM pg_replication_slots WHERE slot_name = %s"""


def headroom(url: DbUrl, slot: str, needed: PgPosition | None) -> Headroom:
    """`needed`: the position the task resumes from; None before any, when a missing slot is only not made yet."""
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(_SQL, (slot,))
            row = cur.fetchone()
    finally:
        conn.close()
    if row is None and needed is None:
        return Headroom(Level.OK, f"no replication slot {slot} yet: planning creates it")
    if row is None:
        return slot_headroom(SlotFigures(slot, str(url), False, None, None, None, None))
    wal_status, retained, safe, keep = row
    keep = None if keep is None or keep < 0 else int(keep)  # -1: no limit
    return slot_headroom(SlotFigures(slot, str(url), True, wal_status, retained, keep,
                                     None if safe is None else int(safe)))
