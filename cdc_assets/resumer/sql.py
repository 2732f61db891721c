"""Position table in a MySQL/PostgreSQL database: the target (`from_target`) or a named one (`from_db`).

With `from_target`, the engine runs `write_in()` inside the same sink transaction that makes a split's rows
visible, so rows and finished marker commit together or not at all.
"""
from __future__ import annotations

from typing import Sequence

from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect, placeholder, qualified, quote_ident
from cdc_assets.dbapi.mysql_flavour import detect
from cdc_assets.dbapi.transaction import transaction
from cdc_assets.resumer.records import PositionRecord
from cdc_assets.resumer.store import (KEY_COLUMNS, create_table_sql, key_column_type, rows_to_records, selects,
                                     upsert_params, upsert_sql)


class SqlPositionStore:
    def __init__(self, url: DbUrl, table_full_name: str, resume_type: str) -> None:
        namespace, _, name = table_full_name.partition(".")
        if not name:
            namespace, name = "cdc_assets_meta", namespace
        self.url = url
        self.dialect = url.db_type
        self.resume_type = resume_type
        self.table = qualified(self.dialect, namespace, name)
        self._namespace, self._name = namespace, name
        self._conn = connect(url)
        self._ensure_table()

    def _ensure_table(self) -> None:
        ns = quote_ident(self.dialect, self._namespace)
        collation = detect(self._conn).nopad_binary_collation if self.dialect == "mysql" else None
        with self._conn.cursor() as cur:
            cur.execute(f"CREATE {'DATABASE' if self.dialect == 'mysql' else 'SCHEMA'} IF NOT EXISTS {ns}")
            cur.execute(create_table_sql(self.table, self.dialect, collation))
            if collation is not None:
                self._binary_keys(cur, collation)

    def _binary_keys(self, cur, collation: str) -> None:
        """A position table created while its ids took the database's default collation is converted once:
        records that were apart stay apart under the stricter one."""
        cur.execute("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                    f"AND COLUMN_NAME IN ({', '.join(['%s'] * len(KEY_COLUMNS))}) AND COLLATION_NAME <> %s",
                    (self._namespace, self._name, *KEY_COLUMNS, collation))
        if cur.fetchone()[0]:
            key = key_column_type(self.dialect, collation)
            cur.execute(f"ALTER TABLE {self.table} " + ", ".join(f"MODIFY {c} {key} NOT NULL" for c in KEY_COLUMNS))

    def statements(self, records: Sequence[PositionRecord]) -> tuple[str, list[tuple]]:
        """The upsert to run in a caller's transaction on the same database."""
        return upsert_sql(self.table, self.dialect, placeholder(self.dialect)), upsert_params(records)

    def write_in(self, cursor, records: Sequence[PositionRecord]) -> None:
        sql, params = self.statements(records)
        cursor.executemany(sql, params)

    def put(self, records: Sequence[PositionRecord]) -> None:
        with transaction(self._conn) as cur:
            self.write_in(cur, records)

    def load(self, task_id: str, resumer_type: str | None = None,
             keys: Sequence[str] | None = None) -> list[PositionRecord]:
        out = []
        with self._conn.cursor() as cur:
            for sql, params in selects(self.table, placeholder(self.dialect), task_id, resumer_type, keys):
                cur.execute(sql, params)
                out += rows_to_records(cur.fetchall())
        return out

    def clear(self, task_id: str) -> None:
        with self._conn.cursor() as cur:
            cur.execute(f"DELETE FROM {self.table} WHERE task_id = {placeholder(self.dialect)}", (task_id,))

    def close(self) -> None:
        self._conn.close()

    def describe(self) -> str:
        return f"table {self.table} in {self.url}"
