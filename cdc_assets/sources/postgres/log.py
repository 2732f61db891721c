"""PostgreSQL logical replication as the task's log: publication and slot, reader, start positions."""
from __future__ import annotations

from datetime import datetime

from cdc_assets.core.headroom import Headroom
from cdc_assets.core.positions import PgPosition
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.errors import REPLAN_HINT, ConfigError, PositionLost
from cdc_assets.sources.postgres.partitions import refuse_overlap
from cdc_assets.sources.postgres.reader import PgLogReader
from cdc_assets.sources.postgres import slot_headroom
from cdc_assets.sources.postgres.slot import ensure_publication, ensure_slot, publication_name, slot_name, slot_state


class PostgresLog:
    distance_unit = "bytes"  # of WAL

    def __init__(self, url: DbUrl, task_id: str) -> None:
        self.url = url
        self.slot = slot_name(task_id)
        self.publication = publication_name(task_id)

    def prepare(self, tables: list[TableId], replan: bool = False) -> PgPosition:
        """Publication and slot, created before the first low watermark: the slot keeps the WAL of every
        commit after its consistent point, which precedes every watermark taken later. A re-plan makes a new
        slot (an invalidated one cannot be used again); otherwise an invalidated slot raises PositionLost."""
        conn = connect(self.url)
        try:
            refuse_overlap(conn, tables)
            ensure_publication(conn, self.publication, tables)
            return ensure_slot(conn, self.slot, recreate=replan)
        finally:
            conn.close()

    def reader(self, schemas: dict[TableId, TableSchema], purpose: str = "sync",
               source_text: bool = False) -> PgLogReader:
        return PgLogReader(self.url, self.slot, self.publication, schemas, acknowledged=purpose == "sync",
                           source_text=source_text)

    def earliest(self) -> PgPosition:
        """The oldest position the slot can still decode from."""
        conn = connect(self.url)
        try:
            state = slot_state(conn, self.slot)
        finally:
            conn.close()
        if state is None or state.confirmed_flush_lsn is None:
            raise PositionLost(f"replication slot {self.slot} does not exist on {self.url}", REPLAN_HINT)
        return state.confirmed_flush_lsn

    def position_at(self, when: datetime) -> PgPosition:
        raise ConfigError("startup_mode timestamp is not possible for PostgreSQL: a slot cannot be moved back and "
                          "WAL records carry no time before their commit", "use latest, or position with an lsn")

    def distance(self, a: PgPosition, b: PgPosition) -> int:
        return max(0, b.lsn - a.lsn)

    def headroom(self, needed: PgPosition | None) -> Headroom:
        """The slot's retained WAL against max_slot_wal_keep_size: the slot keeps what `needed` lies in."""
        return slot_headroom.headroom(self.url, self.slot, needed)
