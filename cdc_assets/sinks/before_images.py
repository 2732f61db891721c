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

from psycopg2.extras import execute_values

from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.errors import CdcError
from cdc_assets.sinks.base import SqlSink

META = "cdc_assets_meta"
SAVEPOINTS = "savepoints"
ROLLBACKS = "savepoint_rollbacks"
EPOCH, PRESENT = "_cdc_epoch", "_cdc_present"
KEYS_PER_STATEMENT = 1000


@dataclass(frozen=True)
class SavepointRow:
    name: str
    epoch: int
    created_at: str
    data: dict


class BeforeImages:
    """The savepoint tables of one target, through `sink`'s dialect and connection."""

    def __init__(self, sink) -> None:
        self.sink = sink
        self.supported = isinstance(sink, SqlSink)  # a MongoDB target has no savepoints yet
        self.mysql = sink.db_type == "mysql"

    # -- names and DDL (autocommit, outside any transaction)
    def meta(self, name: str) -> str:
        return self.sink.table_sql(TableId(META, name))

    def shadow(self, task_id: str, table: TableId) -> TableId:
        digest = hashlib.sha256(f"{task_id}|{table}".encode()).hexdigest()[:16]
        return TableId(META, f"before_{digest}")

    def _text_key(self) -> str:
        if self.mysql:
            return f"VARCHAR(255) CHARACTER SET utf8mb4 COLLATE {self.sink.key_collation}"
        return "TEXT"

    def ensure_meta(self) -> None:
        if not self.supported:
            raise CdcError(f"savepoints need a MySQL or PostgreSQL target; {self.sink.url} is {self.sink.db_type}",
                           "take a backup of the target collections instead (mongodump), or sync into a SQL target")
        key, text = self._text_key(), "LONGTEXT" if self.mysql else "TEXT"
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
        key = schema.primary_key
        names = [c.name for c in schema.columns if c.name in columns]
        q = self.sink.q
        col_list = ", ".join(q(n) for n in names)
        if self.mysql:
            adapt = {k: f for k in key if (f := self.sink._adapter(schema.column(k))) is not None}
            params = [tuple(adapt[k](v) if v is not None and k in adapt else v for k, v in zip(key, row)) for row in keys]
            one = f"({', '.join(['%s'] * len(key))})"
            key_list = ", ".join(q(k) for k in key)
            keep = f"ON DUPLICATE KEY UPDATE {q(EPOCH)} = VALUES({q(EPOCH)})"  # keeps the epoch's first image
            for i in range(0, len(params), KEYS_PER_STATEMENT):
                chunk = params[i:i + KEYS_PER_STATEMENT]
                flat = [v for row in chunk for v in row]
                cur.execute(f"INSERT INTO {shadow} ({q(EPOCH)}, {q(PRESENT)}, {col_list}) SELECT {int(epoch)}, 1, "
                            f"{col_list} FROM {target} WHERE ({key_list}) IN ({', '.join([one] * len(chunk))}) {keep}",
                            flat)
                cur.execute(f"INSERT INTO {shadow} ({q(EPOCH)}, {q(PRESENT)}, {key_list}) VALUES "
                            f"{', '.join([f'({int(epoch)}, 0, ' + ', '.join(['%s'] * len(key)) + ')'] * len(chunk))} "
                            f"{keep}", flat)
            return
        types = {k: self.sink.column_type(schema.column(k), True) for k in key}
        values = [f"v.{q(n)}" if n in key else f"t.{q(n)}" for n in names]
        match = " AND ".join(f"t.{q(k)} = v.{q(k)}" for k in key)
        execute_values(
            cur, f"INSERT INTO {shadow} ({q(EPOCH)}, {q(PRESENT)}, {col_list}) "
                 f"SELECT {int(epoch)}, CASE WHEN t.{q(key[0])} IS NULL THEN 0 ELSE 1 END, {', '.join(values)} "
                 f"FROM (VALUES %s) AS v({', '.join(q(k) for k in key)}) LEFT JOIN {target} t ON {match} "
                 f"ON CONFLICT ({', '.join(q(k) for k in (*key, EPOCH))}) DO NOTHING",
            [tuple(repr(v) if isinstance(v, float) else v for v in row) for row in keys],
            template="(" + ", ".join(f"CAST(%s AS {types[k]})" for k in key) + ")", page_size=5000)

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
        conflict = (f"ON DUPLICATE KEY UPDATE {q(EPOCH)} = {shadow}.{q(EPOCH)}" if self.mysql else
                    f"ON CONFLICT ({', '.join(q(k) for k in (*key, EPOCH))}) DO NOTHING")
        if self.mysql:  # MySQL cannot insert into a table it selects from: through a derived table
            cur.execute(f"INSERT INTO {shadow} ({q(EPOCH)}, {rest}) SELECT {int(into)}, {rest} FROM "
                        f"(SELECT {rest} FROM {shadow} WHERE {q(EPOCH)} = %s) AS later {conflict}", (epoch,))
        else:
            cur.execute(f"INSERT INTO {shadow} ({q(EPOCH)}, {rest}) SELECT {int(into)}, {rest} FROM {shadow} "
                        f"WHERE {q(EPOCH)} = %s {conflict}", (epoch,))
        cur.execute(f"DELETE FROM {shadow} WHERE {q(EPOCH)} = %s", (epoch,))

    def drop_epochs(self, cur, task_id: str, table: TableId, below: int) -> None:
        """Images only savepoints older than `below` needed (the oldest one was deleted)."""
        shadow = self.sink.table_sql(self.shadow(task_id, table))
        cur.execute(f"DELETE FROM {shadow} WHERE {self.sink.q(EPOCH)} < %s", (below,))

    def image_count(self, cur, task_id: str, table: TableId) -> int:
        cur.execute(f"SELECT COUNT(*) FROM {self.sink.table_sql(self.shadow(task_id, table))}")
        return int(cur.fetchone()[0])
