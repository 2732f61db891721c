"""The relational sink: what MySQL and PostgreSQL targets share, composed of parts that each own one concept: its
connections (`connections.py`), its target tables (`target_tables.py`), the snapshot's staging tables and their
merge (`staging.py`), and the move marks (`move_marks.py`). Each engine's sink declares its dialect (types,
statements, catalog reads) and applies log batches through a part of its own.
"""
from __future__ import annotations

from typing import Any, ContextManager

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.boundary import RowExport, SplitRanges, TargetFormat, Transport
from cdc_assets.core.fits import Capacity
from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.keys import order_agrees
from cdc_assets.core.splits import KeyRange
from cdc_assets.core.tables import Column, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import qualified, quote_ident
from cdc_assets.dbapi.jdbc import jdbc_for
from cdc_assets.sinks import range_read, repair_rows
from cdc_assets.sinks.connections import TargetConnections
from cdc_assets.sinks.image_sql import ImageSql
from cdc_assets.sinks.move_marks import MoveMarks
from cdc_assets.sinks.split_locks import SplitLocks
from cdc_assets.sinks.staging import StagingTables, staging_table
from cdc_assets.sinks.target_tables import TargetTables


class SqlSink:
    """A `Sink` over SQL (MySQL, PostgreSQL); each engine fills in the hooks below."""

    db_type: str
    text_type: str  # unbounded text: a value carried as text, a document of the cdc_assets_meta tables
    meta_key_type: str  # a text key of the cdc_assets_meta tables (a task id, a table name), compared exactly
    column_type_sql = "NULL"  # the catalog's full type text beside DATA_TYPE (MySQL: COLUMN_TYPE, for unsigned)
    supports_savepoints = True
    repairs_lock_free = True  # engine/repair.py: the range held in the target, never on the source
    images: ImageSql  # its engine's before-image statements (sinks/image_sql.py)
    # Snapshot groups committing at once, each on its own connection. One here: InnoDB's range DELETE takes
    # next-key locks past the range's end, which a neighbouring group's INSERT would wait on (or deadlock).
    concurrent_commits = 1
    # Two splits per slot in a group (one Spark job): a core whose split ended early takes the group's next one
    # instead of idling until its slowest split ends (docs/benchmarks/snapshot.md, "Two splits per task slot").
    splits_per_slot = 2

    def __init__(self, url: DbUrl, source_db_type: str, write_batch_size: int = 50_000) -> None:
        self.url = url
        self.source_db_type = source_db_type  # its native declarations are kept only engine to same engine
        self.write_batch_size = write_batch_size  # rows per JDBC batch of a staging write
        self.connections = TargetConnections(url)
        self.tables = TargetTables(self)
        self.staging = StagingTables(self, self.connections)
        self.move_marks = MoveMarks(self)

    def catalog(self) -> ContextManager[Any]:
        """A cursor on the sink's own autocommit connection (catalog reads, DDL), one thread at a time: every use
        of that connection goes through here (`TargetConnections.catalog`)."""
        return self.connections.catalog()

    def transaction(self) -> ContextManager:
        """`with sink.transaction() as tx:` a cursor inside one transaction on the commit connection, committed
        when the block ends, rolled back when it raises. The engine writes a snapshot group's merge, backfill
        and finished markers, or a log batch and its checkpoint, through it."""
        return self.connections.transaction()

    # -- the dialect each engine declares
    def target_format(self) -> TargetFormat:
        raise NotImplementedError

    def column_type(self, column: Column, in_key: bool) -> str:
        raise NotImplementedError

    def load_expr(self, t: Transport, staged: str) -> str:
        raise NotImplementedError

    def delete_staged_keys_sql(self, target: str, staging: str, key_match) -> str:
        """`key_match(target_ref, staging_ref)` renders the key equality between the two tables."""
        raise NotImplementedError

    def create_namespace_sql(self, namespace: str) -> str:
        raise NotImplementedError

    def relation_bytes(self, cursor, table: str, name: TableId) -> int:
        raise NotImplementedError

    def existing_columns(self, table: TableId) -> set[str] | None:
        raise NotImplementedError

    def alter_column_sql(self, table: TableId, column: Column, in_key: bool = False) -> str:
        raise NotImplementedError

    def staging_prefix(self) -> str:
        return "CREATE TABLE"

    def staging_columns(self, transports: tuple[Transport, ...], key: tuple[str, ...]) -> list[str]:
        # Key columns are declared as in the target table, so the delete-join compares keys by the target's rules.
        return [f"{self.q(t.column.name)} "
                f"{self.text_type if t.as_text else self.column_type(t.column, t.column.name in key)}"
                for t in transports]

    def check_key_columns(self, schema: TableSchema) -> None:
        """Refuse an existing target table whose key columns would merge keys the source keeps apart."""

    def parses_source_text(self) -> bool:
        return False

    def q(self, name: str) -> str:
        return quote_ident(self.db_type, name)

    def table_sql(self, table: TableId) -> str:
        return qualified(self.db_type, table.namespace, table.name)

    # -- the log phase
    def prepare_changes(self, schema: TableSchema, changes: TableChanges) -> None:
        """A batch with moves, or any part of a transaction in parts (`move_marks` says why), makes sure the move
        marks' table exists outside the transaction; an engine's sink may render more ahead (see PostgresSink)."""
        if changes.moves or changes.parts is not None:
            self.move_marks.ensure()

    def apply_changes(self, cursor, schema: TableSchema, changes: TableChanges) -> None:
        """Write a compacted batch of one table: deletes, full rows (replacing), and partial rows (updating only
        the columns they carry)."""
        raise NotImplementedError

    # -- target tables (target_tables.py)
    def ensure_table(self, schema: TableSchema, follow: bool = False) -> bool:
        return self.tables.ensure(schema, follow)

    def add_columns(self, schema: TableSchema, columns: list[Column], defaults: dict[str, str] | None = None) -> None:
        self.tables.add_columns(schema, columns, defaults)

    def column_capacities(self, table: TableId, fresh: bool = False) -> dict[str, Capacity | None]:
        return self.tables.capacities(table, fresh)

    def check_key_order(self, kind: str, source_db_type: str) -> bool:
        return order_agrees(kind, source_db_type, self.db_type)

    # -- the snapshot (staging.py)
    def jdbc(self) -> JdbcEndpoint:
        return jdbc_for(self.url, write=True)

    def split_locks(self, task_id: str) -> SplitLocks:
        return SplitLocks(self.url, task_id)

    def staging_table(self, table: TableId, first_split: int) -> TableId:
        return staging_table(table, first_split)

    def create_staging(self, staging: TableId, export: RowExport, key: tuple[str, ...]) -> None:
        self.staging.create(staging, export, key)

    def staged_bytes(self, staging: TableId) -> int:
        return self.staging.staged_bytes(staging)

    def merge_staged(self, cursor, schema: TableSchema, staging: TableId, export: RowExport,
                     replace: SplitRanges, counts: dict[int, int] | None = None) -> dict[int, int]:
        return self.staging.merge(cursor, schema, staging, export, replace, counts)

    def unstaged_keys(self, cursor, schema: TableSchema, staging: TableId, export: RowExport,
                      replace: SplitRanges) -> list[tuple]:
        return self.staging.unstaged_keys(cursor, schema, staging, export, replace)

    def drop_staging(self, staging: TableId) -> None:
        self.staging.drop(staging)

    # -- verification (range_read.py)
    def range_rows(self, schema: TableSchema, key_range: KeyRange, kind: str, source_db_type: str,
                   source_keys: list[tuple]) -> list[tuple]:
        return range_read.range_rows(self, schema, key_range, kind, source_db_type, source_keys)

    # -- repair (repair_rows.py)
    def repair_transaction(self, schema: TableSchema, ranges: SplitRanges) -> ContextManager:
        return repair_rows.repair_transaction(self, schema, ranges)

    def keep_rows(self, cursor, schema: TableSchema, keys: set[tuple], ranges: SplitRanges) -> repair_rows.KeptRows:
        return repair_rows.KeptRows(self, cursor, schema, keys, ranges)

    def close(self) -> None:
        self.connections.close()
