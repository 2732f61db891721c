"""The snapshot's staging tables in a SQL target: created for a group of splits, filled by Spark (JDBC inserts or
COPY), then merged into the target table inside the engine's transaction, replacing the splits' rows (delete,
then insert: idempotent), and dropped once that committed."""
from __future__ import annotations

import hashlib
from typing import Callable

from cdc_assets.core.boundary import SPLIT_COLUMN, RowExport, SplitRanges, Transport
from cdc_assets.core.keys import range_predicate
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.sinks.connections import TargetConnections


def staging_table(table: TableId, first_split: int) -> TableId:
    """Deterministic per table and first split, so a crashed run's staging table is replaced, not left to pile up;
    a hash of the whole name keeps long names that share a prefix apart within the 63-character limit."""
    digest = hashlib.sha256(str(table).encode()).hexdigest()[:10]
    return TableId(table.namespace, f"_cdc_stage_{table.name[:24]}_{digest}_{first_split}")


class StagingTables:
    """The staging tables of one sink, in the dialect `sink` declares (`staging_columns`, `staging_prefix`,
    `load_expr`, `delete_staged_keys_sql`, `relation_bytes`): created through its `catalog()`, merged through the
    caller's transaction, measured and dropped on the calling thread's commit connection."""

    def __init__(self, sink, connections: TargetConnections) -> None:
        self.sink = sink
        self.connections = connections

    def create(self, staging: TableId, export: RowExport, key: tuple[str, ...]) -> None:
        sink = self.sink
        cols = [f"{sink.q(SPLIT_COLUMN)} INTEGER NOT NULL"] + sink.staging_columns(export.transports, key)
        with sink.catalog() as cur:
            cur.execute(sink.create_namespace_sql(staging.namespace))
            cur.execute(f"DROP TABLE IF EXISTS {sink.table_sql(staging)}")
            cur.execute(f"{sink.staging_prefix()} {sink.table_sql(staging)} ({', '.join(cols)})")

    def staged_bytes(self, staging: TableId) -> int:
        """The staging table's size on disk, read on the commit connection before its transaction."""
        with self.connections.committer().cursor() as cur:
            return self.sink.relation_bytes(cur, self.sink.table_sql(staging), staging)

    def merge(self, cursor, schema: TableSchema, staging: TableId, export: RowExport,
              replace: SplitRanges, counts: dict[int, int] | None = None) -> dict[int, int]:
        """Replace the splits' key ranges in the target with the staged rows, through `cursor` (inside the
        caller's `transaction()`); the staged rows per split index: `counts` when the staging write counted them
        (each COPY task its split's: a scan of the staging table less on the commit, which paces the snapshot),
        else counted here.

        Where the target orders the key as the source does (`replace.by_range`), the ranges are deleted, then the
        staged rows inserted: rows the source deleted since an earlier read of the splits go too. Otherwise only
        the staged keys are replaced here, and the caller removes the rows the source no longer has
        (`unstaged_keys`). Against an empty target (a first snapshot) delete + plain insert is twice as fast as
        ON CONFLICT DO UPDATE."""
        sink = self.sink
        stage_sql, target_sql, transports = sink.table_sql(staging), sink.table_sql(schema.table), export.transports
        names = ", ".join(sink.q(t.column.name) for t in transports)
        loads = ", ".join(sink.load_expr(t, f"s.{sink.q(t.column.name)}") for t in transports)
        if counts is None:
            cursor.execute(f"SELECT {sink.q(SPLIT_COLUMN)}, COUNT(*) FROM {stage_sql} GROUP BY {sink.q(SPLIT_COLUMN)}")
            counts = {int(i): int(n) for i, n in cursor.fetchall()}
        if replace.by_range:
            cursor.execute(f"DELETE FROM {target_sql} WHERE {self.range_sql(schema, replace)}")
        else:
            cursor.execute(sink.delete_staged_keys_sql(target_sql, stage_sql, self._key_match(schema, transports)))
        cursor.execute(f"INSERT INTO {target_sql} ({names}) SELECT {loads} FROM {stage_sql} s")
        return counts

    def unstaged_keys(self, cursor, schema: TableSchema, staging: TableId, export: RowExport,
                      replace: SplitRanges) -> list[tuple]:
        """Keys the target holds in the splits' ranges, by the target's own order, that the group did not stage:
        rows the source deleted since an earlier read, or rows of other splits when the two orders differ."""
        q, table_sql = self.sink.q, self.sink.table_sql
        keys = ", ".join(f"t.{q(k)}" for k in schema.primary_key)
        match = self._key_match(schema, export.transports)
        cursor.execute(f"SELECT {keys} FROM {table_sql(schema.table)} t WHERE ({self.range_sql(schema, replace, 't')}) "
                       f"AND NOT EXISTS (SELECT 1 FROM {table_sql(staging)} s WHERE {match('t', 's')})")
        return [tuple(row) for row in cursor.fetchall()]

    def drop(self, staging: TableId) -> None:
        """After the merge committed, on the commit connection: MySQL's DROP TABLE would commit a transaction
        still open."""
        with self.connections.committer().cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {self.sink.table_sql(staging)}")

    def range_sql(self, schema: TableSchema, replace: SplitRanges, ref: str | None = None) -> str:
        q = self.sink.q
        column = q(schema.split_column.name) if ref is None else f"{ref}.{q(schema.split_column.name)}"
        return " OR ".join(f"({range_predicate(column, r, replace.kind, self.sink.db_type)})" for r in replace.ranges)

    def _key_match(self, schema: TableSchema, transports: tuple[Transport, ...]) -> Callable[[str, str], str]:
        """`match(target_ref, staging_ref)` renders the key equality between the target and a staging table."""
        q, load_expr = self.sink.q, self.sink.load_expr
        by_name = {t.column.name: t for t in transports}
        return lambda t_ref, s_ref: " AND ".join(
            f"{t_ref}.{q(k)} = {load_expr(by_name[k], f'{s_ref}.{q(k)}')}" for k in schema.primary_key)
