"""PostgreSQL as a target: type mapping, staging (UNLOGGED) and COPY into it, and log batches applied by
`postgres_apply.py` with what `postgres_lookups.py` reads of each table's catalog."""
from __future__ import annotations

from functools import cached_property

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.boundary import CopyWrite, RowExport, RowFormat, TargetFormat, Transport
from cdc_assets.core.fits import Capacity
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import postgres_args
from cdc_assets.errors import TableError
from cdc_assets.sinks.base import SqlSink
from cdc_assets.sinks.image_sql import PostgresImageSql
from cdc_assets.sinks.postgres_apply import PostgresBatches
from cdc_assets.sinks.postgres_lookups import CatalogLookups
from cdc_assets.sinks.postgres_types import kind_to_postgres


class PostgresSink(SqlSink):
    db_type = "postgres"
    text_type = meta_key_type = "text"  # a text key compares byte for byte: a database's collation is deterministic
    images = PostgresImageSql()
    # Groups' ranges are disjoint and PostgreSQL locks rows, not gaps: two merges run side by side, so the second
    # core works while the last reads' commits would otherwise queue behind one backend.
    concurrent_commits = 2

    def __init__(self, url: DbUrl, source_db_type: str, write_batch_size: int = 50_000) -> None:
        super().__init__(url, source_db_type, write_batch_size)
        self.lookups = CatalogLookups(self)
        self.batches = PostgresBatches(self, self.lookups)

    def target_format(self) -> TargetFormat:
        """COPY text lines: Spark carries one string column, which COPY parses into the staging table's types."""
        return TargetFormat(self.db_type, RowFormat.COPY_TEXT, self.column_type)

    def staging_write(self, staging: TableId, export: RowExport) -> CopyWrite:
        if export.format != RowFormat.COPY_TEXT:
            raise ValueError(f"a PostgreSQL staging table takes COPY_TEXT rows, not {export.format.value}")
        return CopyWrite(postgres_args(self.url), f"COPY {self.table_sql(staging)} FROM STDIN")

    def column_type(self, column: Column, in_key: bool) -> str:
        if self.source_db_type == "postgres":
            # Same engine: the declaration itself, except user-defined enums, which may not exist here.
            return "text" if column.kind == Kind.ENUM else column.native
        if column.kind == Kind.GEOMETRY and self.has_postgis:
            return "geometry"  # unconstrained: each value keeps its own SRID, as in MySQL
        return kind_to_postgres(column)

    def parses_source_text(self) -> bool:
        # Same engine, columns declared as in the source (an enum as text, its label): every type's input
        # function reads its own output back to the same value, as pg_dump relies on. The reader's session
        # settings (DateStyle ISO, IntervalStyle postgres, UTC) print texts any target session reads alike.
        return self.source_db_type == "postgres"

    @cached_property
    def has_postgis(self) -> bool:
        with self.catalog() as cur:
            cur.execute("SELECT 1 FROM pg_extension WHERE extname = 'postgis'")
            return cur.fetchone() is not None

    def ensure_table(self, schema: TableSchema, follow: bool = False) -> bool:
        self._check_types(schema)
        self.lookups.forget(schema.table)
        return super().ensure_table(schema, follow)

    def add_columns(self, schema: TableSchema, columns: list[Column], defaults: dict[str, str] | None = None) -> None:
        self.lookups.forget_casts(schema.table)
        super().add_columns(schema, columns, defaults)

    def column_capacities(self, table: TableId, fresh: bool = False) -> dict[str, Capacity | None]:
        if fresh:
            self.lookups.forget_casts(table)  # the casts follow what the capacities say
        return super().column_capacities(table, fresh)

    def alter_column_sql(self, table: TableId, column: Column, in_key: bool = False) -> str:
        return (f"ALTER TABLE {self.table_sql(table)} ALTER COLUMN {self.q(column.name)} "
                f"TYPE {self.column_type(column, in_key)}")

    def _check_types(self, schema: TableSchema) -> None:
        """Same engine, same declarations: a type from an extension (hstore) must exist on the target too."""
        if self.source_db_type != "postgres":
            return
        declared = {c.name: self.column_type(c, False) for c in schema.columns}
        with self.catalog() as cur:
            cur.execute("SELECT t FROM unnest(%s::text[]) AS t WHERE to_regtype(t) IS NULL", (list(declared.values()),))
            missing = {r[0] for r in cur.fetchall()}
        for name, type_name in declared.items():
            if type_name in missing:
                raise TableError(
                    f"column '{name}' of {schema.table} has type {type_name}, which {self.url} does not know",
                    "create it there first (for an extension's type: CREATE EXTENSION <extension>), or leave the "
                    f"column out with source.exclude_columns: {{{schema.table}: [{name}]}}")

    def load_expr(self, t: Transport, staged: str) -> str:
        return f"{staged}::{self.column_type(t.column, False)}" if t.as_text else staged

    def delete_staged_keys_sql(self, target: str, staging: str, key_match) -> str:
        return f"DELETE FROM {target} t USING {staging} s WHERE {key_match('t', 's')}"

    def create_namespace_sql(self, namespace: str) -> str:
        return f"CREATE SCHEMA IF NOT EXISTS {self.q(namespace)}"

    def staging_prefix(self) -> str:
        return "CREATE UNLOGGED TABLE"  # staging is rebuilt after a crash anyway: skip the WAL

    def prepare_changes(self, schema: TableSchema, changes: TableChanges) -> None:
        """Besides the move marks' table: the full rows' COPY text, rendered while the target still applies the
        batch before (`PostgresBatches.prepare`)."""
        super().prepare_changes(schema, changes)
        self.batches.prepare(schema, changes)

    def apply_changes(self, cursor, schema: TableSchema, changes: TableChanges) -> None:
        self.batches.apply(cursor, schema, changes)

    def relation_bytes(self, cursor, table: str, name: TableId) -> int:
        cursor.execute("SELECT pg_total_relation_size(%s::regclass)", (table,))
        return int(cursor.fetchone()[0])

    def existing_columns(self, table: TableId) -> set[str] | None:
        with self.catalog() as cur:
            cur.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                        (table.namespace, table.name))
            names = {r[0] for r in cur.fetchall()}
        return names or None
