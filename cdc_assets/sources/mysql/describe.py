"""A MySQL/MariaDB table as information_schema describes it: its columns classified into logical kinds, and the key
the snapshot splits and upserts on."""
from __future__ import annotations

import pymysql

from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import MISSING_TABLE_HINT, TableMissing
from cdc_assets.sources.base import resolve_key
from cdc_assets.sources.mysql import types

_COLUMNS_SQL = """
SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_MAXIMUM_LENGTH,
       NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, COLLATION_NAME, CHARACTER_SET_NAME
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION"""
_PK_SQL = """
SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE
WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION"""
_UNIQUE_SQL = """
SELECT INDEX_NAME FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0
GROUP BY INDEX_NAME HAVING COUNT(*) = 1 AND MAX(COLUMN_NAME) = %s"""


def describe_table(conn, url: DbUrl, mariadb: bool, table: TableId, split_column: str | None = None) -> TableSchema:
    """The table's schema, read over `conn`; `url` names the server in errors. Raises TableMissing (no such
    table) or TableError (no key to split on)."""
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(_COLUMNS_SQL, (table.namespace, table.name))
        rows = [{k.lower(): v for k, v in r.items()} for r in cur.fetchall()]
        if not rows:
            raise TableMissing(f"table {table} does not exist on {url}", MISSING_TABLE_HINT)
        cur.execute(_PK_SQL, (table.namespace, table.name))
        pk = tuple(r["COLUMN_NAME"] for r in cur.fetchall())
    json_columns = _json_columns(conn, table) if mariadb else set()
    columns = tuple(types.column_from_catalog(r, json_columns) for r in rows)
    return resolve_key(table, columns, pk, split_column, lambda c: _is_unique(conn, table, c))


def _json_columns(conn, table: TableId) -> set[str]:
    """MariaDB's JSON columns: LONGTEXT with a json_valid() check constraint."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s", (table.namespace, table.name))
        clauses = [r[0] for r in cur.fetchall()]
    return {c[len("json_valid(`"):-2] for c in clauses if c.startswith("json_valid(`") and c.endswith("`)")}


def _is_unique(conn, table: TableId, column: str) -> bool:
    with conn.cursor() as cur:
        cur.execute(_UNIQUE_SQL, (table.namespace, table.name, column))
        return cur.fetchone() is not None
