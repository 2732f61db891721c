"""A lock-free repair's commit in a SQL target (engine/repair.py). The split's range is held still against the
sync's writes for the length of the commit (never the source's writers), and the rows of the keys the log changed
since the repair's read are kept as the target holds them while the rest of the range is replaced."""
from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import Iterator

from cdc_assets.core.boundary import SplitRanges
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.dbapi.transaction import transaction

CHUNK = 500  # keys per statement


@contextmanager
def repair_transaction(sink, schema: TableSchema, ranges: SplitRanges) -> Iterator[object]:
    """One transaction on the calling thread's commit connection that first holds the ranges in the target.

    PostgreSQL: the table in SHARE ROW EXCLUSIVE mode, which every INSERT, UPDATE and DELETE waits for (row locks
    would leave inserts into the range free). MySQL: a locking read of the range under REPEATABLE READ, whose
    next-key locks cover the gaps too (READ COMMITTED takes none); the whole table where the target orders the key
    otherwise than the source."""
    conn = sink.connections.committer()
    table = sink.table_sql(schema.table)
    if sink.db_type == "mysql":
        with conn.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    with transaction(conn) as cur:
        if sink.db_type == "postgres":
            cur.execute(f"LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE")
        else:
            where = sink.staging.range_sql(schema, ranges) if ranges.by_range else "TRUE"
            cur.execute(f"SELECT 1 FROM {table} WHERE {where} FOR UPDATE")
        yield cur


class KeptRows:
    """The target's rows of some keys, copied aside inside the transaction and put back after the merge."""

    def __init__(self, sink, cursor, schema: TableSchema, keys: set[tuple], ranges: SplitRanges) -> None:
        self.sink, self.schema, self.keys = sink, schema, sorted(keys, key=repr)
        # The log's keys are the whole table's: only those in the held range are kept (where the target can tell).
        self.within = f" AND ({sink.staging.range_sql(schema, ranges)})" if ranges.by_range else ""
        name, table = f"_cdc_kept_{uuid.uuid4().hex[:12]}", sink.table_sql(schema.table)
        if sink.db_type == "postgres":
            self.name = sink.q(name)
            cursor.execute(f"CREATE TEMP TABLE {self.name} ON COMMIT DROP AS SELECT * FROM {table} WITH NO DATA")
        else:  # a temporary table commits nothing open in MySQL; the connection has no database of its own
            self.name = sink.table_sql(TableId(schema.table.namespace, name))
            cursor.execute(f"CREATE TEMPORARY TABLE {self.name} AS SELECT * FROM {table} WHERE FALSE")
        self.rows = 0  # rows kept: the log changed them since the repair's read
        for where, params in self._chunks():
            cursor.execute(f"INSERT INTO {self.name} SELECT * FROM {table} WHERE {where}", params)
            self.rows += max(cursor.rowcount, 0)

    def put_back(self, cursor) -> None:
        table = self.sink.table_sql(self.schema.table)
        for where, params in self._chunks():
            cursor.execute(f"DELETE FROM {table} WHERE {where}", params)
        cursor.execute(f"INSERT INTO {table} SELECT * FROM {self.name}")
        if self.sink.db_type == "mysql":
            cursor.execute(f"DROP TEMPORARY TABLE {self.name}")

    def _chunks(self):
        columns = "(" + ", ".join(self.sink.q(k) for k in self.schema.primary_key) + ")"
        one = "(" + ", ".join(["%s"] * len(self.schema.primary_key)) + ")"
        for i in range(0, len(self.keys), CHUNK):
            chunk = self.keys[i:i + CHUNK]
            yield f"{columns} IN ({', '.join([one] * len(chunk))}){self.within}", [v for key in chunk for v in key]
