"""What every relational source offers the planner and the snapshot, whatever its log protocol: the split plan
from key probes (split_planning.py), the export of a group of splits as one JDBC query (jdbc_export.py), the
split reads of verification (split_hold.py, split_read.py) and the exact lookup of keys (present_keys.py)."""
from __future__ import annotations

from cdc_assets.core.boundary import KeyStats, RowExport, TargetFormat
from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.keys import key_kind
from cdc_assets.core.splits import KeyRange, Split, SplitPlan
from cdc_assets.core.tables import Column, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import qualified, quote_ident
from cdc_assets.errors import CdcError, TableError
from cdc_assets.sources.jdbc_export import export, export_together, split_predicates
from cdc_assets.sources.present_keys import present_keys
from cdc_assets.sources.split_hold import LOCK_WAIT_SECS, hold_range
from cdc_assets.sources.split_planning import KeyProbes, plan_splits
from cdc_assets.sources.split_read import SplitRead, changed_versions, read_range


class SqlSource:
    """A `SnapshotSource` over SQL (MySQL, PostgreSQL). The engines fill in `db_type`, `url`, `conn`, `probes`
    (the key probes on `conn`), `key_stats`, `jdbc`, `select_expr` and `copy_line`; the rest is shared SQL both
    accept, put together by the modules named above."""

    db_type: str
    url: DbUrl
    probes: KeyProbes
    # Whether each row carries a version that changes with every write (PostgreSQL's xmin): what changed around a
    # lock-free read is then told by the rows themselves; otherwise by the log (engine/verify_window.py).
    row_versions = False

    # -- what each engine fills in
    def key_stats(self, schema: TableSchema, kind: str) -> KeyStats:
        raise NotImplementedError

    def jdbc(self) -> JdbcEndpoint:
        raise NotImplementedError

    def select_expr(self, column: Column, target_db_type: str) -> tuple[str, bool]:
        """SQL for one column in a typed snapshot read (COLUMNS rows), and whether it travels as text."""
        raise NotImplementedError

    def copy_line(self, columns: list[Column], tag_sql: str, declared) -> str:
        """SQL rendering a row as one PostgreSQL COPY text line, `tag_sql` as its first field; `declared(column)`:
        its type on the target."""
        raise NotImplementedError

    def pipes_copy(self, target: TargetFormat) -> bool:
        return False  # an engine with a pipe into a PostgreSQL target's COPY says when it takes it

    def jdbc_endpoint(self) -> JdbcEndpoint | None:
        return self.jdbc()

    def exact_key(self, column: Column) -> bool:
        """Whether `present_keys` must compare this key column byte for byte (its collation would not)."""
        return False

    def quote(self, name: str) -> str:
        return quote_ident(self.db_type, name)

    def table_sql(self, table: TableId) -> str:
        return qualified(self.db_type, table.namespace, table.name)

    # -- planning (split_planning.py)
    def plan(self, schema: TableSchema, split_size: int) -> SplitPlan:
        kind = key_kind(schema.split_column)
        return plan_splits(schema, kind, split_size, self.key_stats(schema, kind), self.probes)

    # -- the snapshot's read (jdbc_export.py)
    def split_predicates(self, plan: SplitPlan, splits: list[Split]) -> tuple[str, ...]:
        return split_predicates(self, plan, splits)

    def export(self, plan: SplitPlan, schema: TableSchema, splits: list[Split], target: TargetFormat) -> RowExport:
        return export(self, plan, schema, splits, target)

    def export_together(self, plan: SplitPlan, schema: TableSchema, splits: list[Split],
                        targets: list[TargetFormat]) -> list[RowExport]:
        return export_together(self, plan, schema, splits, targets)

    def explain_failure(self, schema: TableSchema, export: RowExport, error: Exception) -> CdcError | None:
        return None

    # -- verification
    def hold_split(self, schema: TableSchema, key_range: KeyRange, kind: str, target: TargetFormat | None = None,
                   lock_wait_secs: float = LOCK_WAIT_SECS):
        """Hold the split's range still on this source (split_hold.py) and read its rows under the hold as
        `target` compares them (None: the key columns only)."""
        select = None if target is None else self.compared_columns(schema, target)
        return hold_range(self.url, schema, key_range, kind, select, lock_wait_secs)

    def read_split(self, schema: TableSchema, key_range: KeyRange, kind: str, target: TargetFormat,
                   rows_per_second: int = 0) -> SplitRead:
        """The split's rows as `target` compares them, read without a lock (split_read.py); with each row's
        version where the source keeps one (`row_versions`)."""
        return read_range(self.url, schema, key_range, kind, self.compared_columns(schema, target),
                          versions=self.row_versions, rows_per_second=rows_per_second, conn=self.conn)

    def changed_since(self, schema: TableSchema, key_range: KeyRange, kind: str, target: TargetFormat,
                      read: SplitRead, rows_per_second: int = 0) -> set[tuple]:
        """With `row_versions`: the keys of the range whose row changed since `read` (values as read)."""
        raise NotImplementedError

    def key_versions(self, schema: TableSchema, key_range: KeyRange, kind: str) -> dict[tuple, str]:
        """With `row_versions`: the version of each row of the range, by its key (a repair's window)."""
        return read_range(self.url, schema, key_range, kind, versions=True).versions or {}

    def changed_keys(self, schema: TableSchema, key_range: KeyRange, kind: str, before: dict[tuple, str]) -> set[tuple]:
        """With `row_versions`: the keys of the range updated, deleted or inserted since `before` was read."""
        return changed_versions(self.url, schema, key_range, kind, None, before)

    def compared_columns(self, schema: TableSchema, target: TargetFormat) -> list[str]:
        """Each column as verification reads it: as stored, unless a source renders it for that target."""
        return [self.quote(c.name) for c in schema.columns]

    # -- after the read
    def present_keys(self, schema: TableSchema, keys: list[tuple]) -> set[tuple]:
        """Which of `keys` the source table holds now, compared exactly (present_keys.py)."""
        return present_keys(self.url, self.db_type, schema, keys, self.exact_key)


def resolve_key(table: TableId, columns: tuple[Column, ...], pk: tuple[str, ...], split_column: str | None,
                is_unique) -> TableSchema:
    """Pick the key the snapshot splits and upserts on: the primary key, or a configured unique column."""
    names = {c.name for c in columns}
    if split_column is None:
        if not pk:
            raise TableError(
                f"table {table} has no primary key",
                f"add one, or set source.split_columns: {{{table}: <unique NOT NULL column>}}")
        key = pk
    else:
        if split_column not in names:
            raise TableError(f"split column '{split_column}' does not exist in table {table}",
                             f"pick one of: {', '.join(sorted(names))}")
        if pk and split_column != pk[0]:
            raise TableError(f"split column '{split_column}' of {table} is not its primary key's first column ({pk[0]})",
                             "remove it from source.split_columns; tables with a primary key split on it")
        key = pk or (split_column,)
        if not pk:
            col = next(c for c in columns if c.name == split_column)
            if col.nullable or not is_unique(split_column):
                raise TableError(f"split column '{split_column}' of {table} must be NOT NULL and carry a unique index",
                                 "add a unique index on it (upserts need a unique key), or choose another column")
    schema = TableSchema(table, columns, key)
    if key_kind(schema.split_column) is None:
        raise TableError(f"cannot split {table} on column '{key[0]}' of type {schema.split_column.native}",
                         "split on an integer, decimal, string, uuid, date or binary column")
    return schema

