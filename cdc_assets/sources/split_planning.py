"""The split plan of a relational table: even integer ranges where the key's distribution allows them, otherwise
boundaries found by key probes, queries that read the key index only."""
from __future__ import annotations

import math
from datetime import datetime, timezone

from cdc_assets.core.boundary import KeyStats
from cdc_assets.core.keys import to_key_value, to_param
from cdc_assets.core.splits import KeyValue, SplitPlan
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.dbapi.connect import qualified, quote_ident

EVEN_FACTOR = (0.05, 1000.0)


class KeyProbes:
    """Queries on a table's split column over a source's connection: its bounds, the table's row count, the key
    a number of rows further on, the next key after one."""

    def __init__(self, conn, db_type: str) -> None:
        self.conn = conn
        self.db_type = db_type

    def scalar(self, sql: str, params: tuple = ()):
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            row = cur.fetchone()
        return None if row is None else row[0]

    def min_max(self, schema: TableSchema, kind: str) -> tuple[KeyValue | None, KeyValue | None]:
        k = quote_ident(self.db_type, schema.split_column.name)
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT MIN({k}), MAX({k}) FROM {self._table(schema.table)}")
            lo, hi = cur.fetchone()
        return (None if lo is None else to_key_value(lo, kind)), (None if hi is None else to_key_value(hi, kind))

    def count(self, table: TableId) -> int:
        return int(self.scalar(f"SELECT COUNT(*) FROM {self._table(table)}"))

    def key_at_offset(self, schema: TableSchema, kind: str, start: KeyValue | None, offset: int) -> KeyValue | None:
        """The split-column value `offset` rows after `start` (inclusive) in key order, or None past the end."""
        k = quote_ident(self.db_type, schema.split_column.name)
        where, params = (f"WHERE {k} >= %s ", (to_param(start, kind),)) if start is not None else ("", ())
        value = self.scalar(f"SELECT {k} FROM {self._table(schema.table)} {where}ORDER BY {k} LIMIT 1 OFFSET {offset}",
                            params)
        return None if value is None else to_key_value(value, kind)

    def next_key_after(self, schema: TableSchema, kind: str, value: KeyValue) -> KeyValue | None:
        k = quote_ident(self.db_type, schema.split_column.name)
        found = self.scalar(f"SELECT MIN({k}) FROM {self._table(schema.table)} WHERE {k} > %s", (to_param(value, kind),))
        return None if found is None else to_key_value(found, kind)

    def _table(self, table: TableId) -> str:
        return qualified(self.db_type, table.namespace, table.name)


def plan_splits(schema: TableSchema, kind: str, split_size: int, stats: KeyStats, probes: KeyProbes) -> SplitPlan:
    """Integer keys split evenly when their distribution allows it ((max-min+1)/rows within [0.05, 1000], the
    rule Flink CDC and ape-dts use); every other key is cut by next-boundary queries, which read the key
    index only."""
    if stats.min is None:
        boundaries: list[KeyValue] = []
    elif kind == "int" and EVEN_FACTOR[0] <= (stats.max - stats.min + 1) / max(stats.rows, 1) <= EVEN_FACTOR[1]:
        step = max(1, math.ceil(split_size * (stats.max - stats.min + 1) / max(stats.rows, 1)))
        boundaries = list(range(stats.min + step, stats.max + 1, step))
    else:
        boundaries = _probe_boundaries(probes, schema, kind, split_size, stats.min)
    return SplitPlan(
        table=schema.table, split_column=schema.split_column.name, key_kind=kind, boundaries=tuple(boundaries),
        estimated_rows=_estimates(stats.rows, len(boundaries) + 1, split_size),
        created_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f"),
    )


def _probe_boundaries(probes: KeyProbes, schema: TableSchema, kind: str, split_size: int,
                      first: KeyValue) -> list[KeyValue]:
    """Each boundary is the key `split_size` rows past the previous one; a run of equal split-column
    values longer than a split moves the boundary to the next distinct value, so it is never cut."""
    boundaries: list[KeyValue] = []
    start: KeyValue | None = None
    while True:
        boundary = probes.key_at_offset(schema, kind, start, split_size)
        if boundary is not None and boundary == (first if start is None else start):
            boundary = probes.next_key_after(schema, kind, boundary)
        if boundary is None:
            return boundaries
        boundaries.append(boundary)
        start = boundary


def _estimates(rows: int, count: int, split_size: int) -> tuple[int, ...]:
    if count == 1:
        return (rows,)
    each = min(split_size, math.ceil(rows / count))
    return tuple([each] * (count - 1) + [max(rows - each * (count - 1), 0)])
