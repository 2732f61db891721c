"""The default position store: an embedded SQLite file under runtime.data_dir."""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Sequence

from cdc_assets.resumer.records import PositionRecord
from cdc_assets.resumer.store import create_table_sql, rows_to_records, selects, upsert_params, upsert_sql

TABLE = "task_position"


class SqlitePositionStore:
    resume_type = "sqlite"

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # Several Dagster runs may write at once: WAL lets readers go on, busy_timeout queues writers.
        self._conn = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute(create_table_sql(TABLE, "sqlite"))

    def put(self, records: Sequence[PositionRecord]) -> None:
        with self._conn:  # one transaction; commits on exit
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(upsert_sql(TABLE, "sqlite", "?"), upsert_params(records))

    def load(self, task_id: str, resumer_type: str | None = None,
             keys: Sequence[str] | None = None) -> list[PositionRecord]:
        return [r for sql, params in selects(TABLE, "?", task_id, resumer_type, keys)
                for r in rows_to_records(self._conn.execute(sql, params).fetchall())]

    def clear(self, task_id: str) -> None:
        self._conn.execute(f"DELETE FROM {TABLE} WHERE task_id = ?", (task_id,))

    def close(self) -> None:
        self._conn.close()

    def describe(self) -> str:
        return f"sqlite file {self.path}"
