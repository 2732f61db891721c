"""Savepoint storage in the target: the savepoint records, and per captured table a *before-image* table holding,
for each key a log batch touched after a savepoint, the row as it was before that batch (or that it was absent).

Before-images are labelled with an *epoch*, the number of the newest savepoint when they were written. Within an
epoch only a key's first image is kept (a later batch's insert does nothing on conflict), so a table's images
number the distinct keys changed per savepoint interval, whatever the number of batches. The target as of
savepoint E is: for every key with an image in epoch >= E, its image of the smallest such epoch; every other key
as it is now. Everything here runs through a caller's cursor, inside the caller's target transaction, except the
DDL (`ensure_*`, `drop_shadow`): MySQL's DDL would commit a transaction still open.

The before-image table has the captured columns as the target declares them (key columns NOT NULL, the others
nullable, since an absent key's image has only its key), `_cdc_epoch` and `_cdc_present` (0: the key was absent),
and the primary key (key columns, `_cdc_epoch`).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.errors import CdcError
from cdc_assets.sinks.image_sql import EPOCH, PRESENT

META = "cdc_assets_meta"
SAVEPOINTS = "savepoints"
ROLLBACKS = "savepoint_rollbacks"


@dataclass(frozen=True)
class SavepointRow:
    name: str
    epoch: int
    created_at: str
    data: dict


class BeforeImages:
    """The savepoint tables of one target, through `sink`'s connection and the before-image SQL it declares
    (`images`, where it `supports_savepoints`)."""

    def __init__(self, sink) -> None:
        self.sink = sink
        self.supported = sink.supports_savepoints  # a MongoDB target has no savepoints yet

    # -- names and DDL (autocommit, outside any transaction)
    def meta(self, name: str) -> str:
        return self.sink.table_sql(TableId(META, name))

    def shadow(self, task_id: str, table: TableId) -> TableId:
        digest = hashlib.sha256(f"{task_id}|{table}".encode()).hexdigest()[:16]
        return TableId(META, f"before_{digest}")

    def ensure_meta(self) -> None:
        if not self.supported:
            raise CdcError(f"savepoints need a MySQL or PostgreSQL target; {self.sink.url} is {self.sink.db_type}",
                           "take a backup of the target collections instead (mongodump), or sync into a SQL target")
        key, text = self.sink.meta_key_type, self.sink.text_type
        with self.sink.catalog() as cur:
            cur.execute(self.sink.create_namespace_sql(META))
            cur.execute(f"CREATE TABLE IF NOT EXISTS {self.meta(SAVEPOINTS)} (task_id {key} NOT NULL, name {key} NOT NULL, "
                        f"epoch BIGINT NOT NULL, created_at {key} NOT NULL, data {text} NOT NULL, "
                        "PRIMARY KEY (task_id, name))")
            cur.execute(f"CREATE TABLE IF NOT EXISTS {self.meta(ROLLBACKS)} (task_id {key} NOT NULL, name {key} NOT NULL, "
                        f"state {key} NOT NULL, data {text} NOT NULL, PRIMARY KEY (task_id))")

    def exists(self) -> bool:
        """Whether savepoints were ever used on this target (the log phase writes no image otherwise)."""
        if not self.supported:
            return False
        with self.sink.catalog() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                        (META, SAVEPOINTS))
            return cur.fetchone()[0] > 0

    def ensure_shadow(self, task_id: str, schema: TableSchema) -> TableId:
        shadow = self.shadow(task_id, schema.table)
        key = schema.primary_key
        present = "SMALLINT"
        cols = [f"{self.sink.q(EPOCH)} BIGINT NOT NULL", f"{self.sink.q(PRESENT)} {present} NOT NULL"] + [
            f"{self.sink.q(c.name)} {self.sink.column_type(c, c.name in key)}"
            f"{' NOT NULL' if c.name in key else ' NULL'}" for c in schema.columns]
        pk = ", ".join(self.sink.q(k) for k in (*key, EPOCH))
        with self.sink.catalog() as cur:
            cur.execute(f"CREATE TABLE IF NOT EXISTS {self.sink.table_sql(shadow)} ({', '.join(cols)}, PRIMARY KEY ({pk}))")
        return shadow

    def drop_shadow(self, task_id: str, table: TableId) -> None:
        with self.sink.catalog() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {self.sink.table_sql(self.shadow(task_id, table))}")

    def shadow_columns(self, task_id: str, table: TableId) -> list[str]:
        shadow = self.shadow(task_id, table)
        return sorted(self.sink.existing_columns(shadow) or [])

    # -- savepoint records (through a caller's cursor)
    def newest_epoch(self, cur, task_id: str) -> int | None:
        cur.execute(f"SELECT MAX(epoch) FROM {self.meta(SAVEPOINTS)} WHERE task_id = %s", (task_id,))
        value = cur.fetchone()[0]
        return None if value is None else int(value)

    def savepoints(self, cur, task_id: str) -> list[SavepointRow]:
        cur.execute(f"SELECT name, epoch, created_at, data FROM {self.meta(SAVEPOINTS)} WHERE task_id = %s "
                    "ORDER BY epoch", (task_id,))
        return [SavepointRow(n, int(e), c, json.loads(d)) for n, e, c, d in cur.fetchall()]

    def insert_savepoint(self, cur, task_id: str, row: SavepointRow) -> None:
        cur.execute(f"INSERT INTO {self.meta(SAVEPOINTS)} (task_id, name, epoch, created_at, data) "
                    "VALUES (%s, %s, %s, %s, %s)", (task_id, row.name, row.epoch, row.created_at,
                                                    json.dumps(row.data, sort_keys=True)))

    def delete_savepoints(self, cur, task_id: str, names: list[str]) -> None:
        for name in names:
            cur.execute(f"DELETE FROM {self.meta(SAVEPOINTS)} WHERE task_id = %s AND name = %s", (task_id, name))

    # -- the rollback's intent, which lets a crash between the target's commit and the position write be redone
    def pending(self, cur, task_id: str) -> tuple[str, str, dict] | None:
        cur.execute(f"SELECT name, state, data FROM {self.meta(ROLLBACKS)} WHERE task_id = %s", (task_id,))
        row = cur.fetchone()
        return None if row is None else (row[0], row[1], json.loads(row[2]))

    def set_pending(self, cur, task_id: str, name: str, state: str, data: dict) -> None:
        cur.execute(f"DELETE FROM {self.meta(ROLLBACKS)} WHERE task_id = %s", (task_id,))
        cur.execute(f"INSERT INTO {self.meta(ROLLBACKS)} (task_id, name, state, data) VALUES (%s, %s, %s, %s)",
                    (task_id, name, state, json.dumps(data, sort_keys=True)))

    def clear_pending(self, cur, task_id: str) -> None:
        cur.execute(f"DELETE FROM {self.meta(ROLLBACKS)} WHERE task_id = %s", (task_id,))

    # -- images
    def capture(self, cur, task_id: str, schema: TableSchema, columns: list[str], keys: list[tuple],
                epoch: int) -> None:
        """Before a batch writes `keys` of `schema.table`: their rows now (or that they are absent), in `epoch`,
        unless the epoch holds an image of the key already. `columns`: the before-image table's captured columns."""
        if not keys:
            return
        target, shadow = self.sink.table_sql(schema.table), self.sink.table_sql(self.shadow(task_id, schema.table))
        names = [c.name for c in schema.columns if c.name in columns]
        self.sink.images.capture(cur, self.sink, schema, target, shadow, names, keys, epoch)

    def restore(self, cur, task_id: str, schema: TableSchema, columns: list[str], epoch: int) -> int:
        """Put back every key imaged in `epoch` or later as its oldest such image; drop those images. The keys
        restored."""
        target, shadow = self.sink.table_sql(schema.table), self.sink.table_sql(self.shadow(task_id, schema.table))
        q, key = self.sink.q, schema.primary_key
        keys = ", ".join(q(k) for k in key)
        names = ", ".join(q(c.name) for c in schema.columns if c.name in columns)
        cur.execute(f"SELECT COUNT(DISTINCT {keys}) FROM {shadow} WHERE {q(EPOCH)} >= %s" if len(key) == 1 else
                    f"SELECT COUNT(*) FROM (SELECT DISTINCT {keys} FROM {shadow} WHERE {q(EPOCH)} >= %s) d", (epoch,))
        restored = int(cur.fetchone()[0])
        if not restored:
            return 0
        cur.execute(f"DELETE FROM {target} WHERE ({keys}) IN (SELECT {keys} FROM {shadow} WHERE {q(EPOCH)} >= %s)",
                    (epoch,))
        match = " AND ".join(f"s.{q(k)} = f.{q(k)}" for k in key)
        cur.execute(f"INSERT INTO {target} ({names}) SELECT {', '.join(f's.{q(c.name)}' for c in schema.columns if c.name in columns)} "
                    f"FROM {shadow} s JOIN (SELECT {keys}, MIN({q(EPOCH)}) AS e FROM {shadow} WHERE {q(EPOCH)} >= %s "
                    f"GROUP BY {keys}) f ON {match} AND s.{q(EPOCH)} = f.e WHERE s.{q(PRESENT)} = 1", (epoch,))
        cur.execute(f"DELETE FROM {shadow} WHERE {q(EPOCH)} >= %s", (epoch,))
        return restored

    def merge_epoch(self, cur, task_id: str, table: TableId, key: tuple[str, ...], columns: list[str],
                    epoch: int, into: int) -> None:
        """A deleted savepoint's images become the previous savepoint's where that one has none of the key."""
        shadow = self.sink.table_sql(self.shadow(task_id, table))
        q = self.sink.q
        rest = ", ".join(q(c) for c in columns if c not in (EPOCH,))
        self.sink.images.merge_epoch(cur, self.sink, shadow, key, rest, epoch, into)
        cur.execute(f"DELETE FROM {shadow} WHERE {q(EPOCH)} = %s", (epoch,))

    def drop_epochs(self, cur, task_id: str, table: TableId, below: int) -> None:
        """Images only savepoints older than `below` needed (the oldest one was deleted)."""
        shadow = self.sink.table_sql(self.shadow(task_id, table))
        cur.execute(f"DELETE FROM {shadow} WHERE {self.sink.q(EPOCH)} < %s", (below,))

    def image_count(self, cur, task_id: str, table: TableId) -> int:
        cur.execute(f"SELECT COUNT(*) FROM {self.sink.table_sql(self.shadow(task_id, table))}")
        return int(cur.fetchone()[0])
