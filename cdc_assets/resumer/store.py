"""The position store protocol, and the SQL every table-backed store shares."""
from __future__ import annotations

import json
from typing import Iterable, Iterator, Protocol, Sequence

from cdc_assets.resumer.records import PositionRecord


class PositionStore(Protocol):
    """Where position records live. `put` is durable when it returns."""

    def put(self, records: Sequence[PositionRecord]) -> None: ...

    def load(self, task_id: str, resumer_type: str | None = None,
             keys: Sequence[str] | None = None) -> list[PositionRecord]:
        """The task's records; of one `resumer_type` when given, and of that type only `keys` when given (a
        keyed read: the position table's unique index finds each one, whatever else the task recorded)."""
        ...

    def clear(self, task_id: str) -> None: ...

    def close(self) -> None: ...


COLUMNS = "task_id, resumer_type, position_key, position_data, created_at, updated_at"


def upsert_sql(table: str, dialect: str, placeholder: str) -> str:
    """One statement that inserts a record or replaces its data, for sqlite, postgres and mysql."""
    values = ", ".join([placeholder] * 6)
    head = f"INSERT INTO {table} ({COLUMNS}) VALUES ({values}) "
    if dialect == "mysql":
        return head + "ON DUPLICATE KEY UPDATE position_data = VALUES(position_data), updated_at = VALUES(updated_at)"
    return head + (
        "ON CONFLICT (task_id, resumer_type, position_key) "
        "DO UPDATE SET position_data = excluded.position_data, updated_at = excluded.updated_at"
    )


def upsert_params(records: Iterable[PositionRecord]) -> list[tuple]:
    return [
        (r.task_id, r.resumer_type, r.position_key, r.data_json, r.updated_at, r.updated_at) for r in records
    ]


_ID_COLUMN = {"mysql": "BIGINT AUTO_INCREMENT", "postgres": "BIGSERIAL", "sqlite": "INTEGER"}


def key_column_type(dialect: str, collation: str | None = None) -> str:
    """MySQL cannot index TEXT without a prefix length, hence VARCHAR there. `collation`: a binary one, so that
    ids differing only in case or accents (tables `shop.Orders` and `shop.orders`) stay two records whatever the
    database's default collation."""
    if dialect != "mysql":
        return "TEXT"
    return "VARCHAR(255)" + (f" CHARACTER SET utf8mb4 COLLATE {collation}" if collation else "")


KEY_COLUMNS = ("task_id", "resumer_type", "position_key")


def create_table_sql(table: str, dialect: str, key_collation: str | None = None) -> str:
    key = key_column_type(dialect, key_collation)
    data = "LONGTEXT" if dialect == "mysql" else "TEXT"
    return (
        f"CREATE TABLE IF NOT EXISTS {table} (id {_ID_COLUMN[dialect]} PRIMARY KEY, "
        f"task_id {key} NOT NULL, resumer_type {key} NOT NULL, position_key {key} NOT NULL, "
        f"position_data {data} NOT NULL, created_at {key_column_type(dialect)} NOT NULL, "
        f"updated_at {key_column_type(dialect)} NOT NULL, UNIQUE (task_id, resumer_type, position_key))"
    )


def rows_to_records(rows: Iterable[tuple]) -> list[PositionRecord]:
    return [
        PositionRecord(task_id, rtype, key, json.loads(data), updated)
        for task_id, rtype, key, data, updated in rows
    ]


KEYS_PER_SELECT = 500  # placeholders per statement stay far below every driver's and SQLite's limit


def selects(table: str, placeholder: str, task_id: str, resumer_type: str | None,
            keys: Sequence[str] | None) -> Iterator[tuple[str, tuple]]:
    """(statement, parameters) that read what `PositionStore.load` asks for: by the unique
    (task_id, resumer_type, position_key) index when keys are given, in chunks; no statement for no keys."""
    head = (f"SELECT task_id, resumer_type, position_key, position_data, updated_at FROM {table} "
            f"WHERE task_id = {placeholder}")
    if resumer_type is None:
        yield head + " ORDER BY id", (task_id,)
        return
    head += f" AND resumer_type = {placeholder}"
    if keys is None:
        yield head + " ORDER BY id", (task_id, resumer_type)
        return
    for i in range(0, len(keys), KEYS_PER_SELECT):
        chunk = tuple(keys[i:i + KEYS_PER_SELECT])
        yield f"{head} AND position_key IN ({', '.join([placeholder] * len(chunk))}) ORDER BY id", \
            (task_id, resumer_type, *chunk)
