"""A split's range as the target holds it, read for verification (engine/verify.py), each value exact.

Floats are where a driver's text misleads: MySQL prints a FLOAT with 6 significant digits (3.40282e38 for
3.4028234663852886e38, 16777200 for 16777216), so a FLOAT column is read as the double that holds it exactly;
PostgreSQL prints real and double precision exactly only with `extra_float_digits` above 0 (its default from
version 12), so the session sets it.

JSON is read as its text on either engine: psycopg2 parses json and jsonb, and a parsed JSON string (`""`) is no
longer told apart from JSON text; core/json_text.py compares the texts as JSON.
"""
from __future__ import annotations

from cdc_assets.core.keys import range_predicate
from cdc_assets.core.row_digest import key_text
from cdc_assets.core.splits import KeyRange
from cdc_assets.core.tables import Column, Kind, TableSchema
from cdc_assets.dbapi.connect import connect

# PostgreSQL >= 12 prints the shortest exact text for any value above 0; older ones print every digit with 3.
EXACT_FLOATS = "SET extra_float_digits = 3"


def compared_expr(db_type: str, column: Column, quoted: str) -> str:
    if db_type == "mysql" and column.kind == Kind.FLOAT32:
        return f"CAST({quoted} AS DOUBLE)"
    if db_type == "postgres" and column.kind == Kind.JSON:
        return f"{quoted}::text"
    return quoted


def range_rows(sink, schema: TableSchema, key_range: KeyRange, kind: str, source_db_type: str,
               source_keys: list[tuple]) -> list[tuple]:
    """The target's rows of a split's range (every column, schema order): by the target's own order when it agrees
    with the source's; otherwise also the source's `source_keys` it did not put in the range, looked up one by one
    (text keys: another collation)."""
    columns = ", ".join(compared_expr(sink.db_type, c, sink.q(c.name)) for c in schema.columns)
    table = sink.table_sql(schema.table)
    key_at = [i for k in schema.primary_key for i, c in enumerate(schema.columns) if c.name == k]
    kinds = [schema.columns[i].kind for i in key_at]
    conn = connect(sink.url)
    try:
        with conn.cursor() as cur:
            if sink.db_type == "postgres":
                cur.execute(EXACT_FLOATS)
            where = range_predicate(sink.q(schema.split_column.name), key_range, kind, sink.db_type)
            cur.execute(f"SELECT {columns} FROM {table} WHERE {where}")
            rows = list(cur.fetchall())
            if not sink.check_key_order(kind, source_db_type):
                seen = {key_text([r[i] for i in key_at], kinds) for r in rows}
                match = " AND ".join(f"{sink.q(k)} = %s" for k in schema.primary_key)
                for key in source_keys:
                    if key_text(list(key), kinds) not in seen:
                        cur.execute(f"SELECT {columns} FROM {table} WHERE {match}", list(key))
                        rows += cur.fetchall()
    finally:
        conn.close()
    return rows
