"""PostgreSQL as a snapshot source: capture checks, table discovery, key statistics, WAL position, the snapshot's
select expressions and COPY lines, and a PostgreSQL target's export as one `COPY ... TO` per split."""
from __future__ import annotations

import re
from dataclasses import replace

from cdc_assets.core.added_fill import AddedFill
from cdc_assets.core.boundary import CopyOutExport, KeyStats, RowExport, RowFormat, TargetFormat, Transport
from cdc_assets.core.events import SchemaChange
from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.positions import PgPosition
from cdc_assets.core.splits import KeyRange, Split, SplitPlan
from cdc_assets.core.tables import Column, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect, postgres_args
from cdc_assets.dbapi.jdbc import postgres_jdbc
from cdc_assets.errors import MISSING_TABLE_HINT, SourceSetupError, TableMissing
from cdc_assets.sources.base import SqlSource, resolve_key
from cdc_assets.sources.split_planning import KeyProbes
from cdc_assets.sources.split_read import SplitRead, changed_versions
from cdc_assets.sources.postgres import types
from cdc_assets.sources.postgres.added_fill import added_fill, storage

# Generated columns are not captured: pgoutput leaves them out of every row image (up to PostgreSQL 17), so the log
# could never keep them right. A target may declare them itself (docs/connectors/postgres.md, "Generated columns").
# A domain column is read as its base type (one level: a domain over a domain keeps its name and is refused).
_COLUMNS_SQL = """
SELECT a.attname,
       CASE WHEN t.typtype = 'd' THEN format_type(t.typbasetype, t.typtypmod)
            ELSE format_type(a.atttypid, a.atttypmod) END,
       a.attnotnull, COALESCE(b.typcategory, t.typcategory)
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type b ON t.typtype = 'd' AND b.oid = t.typbasetype
WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum"""
_PK_SQL = """
SELECT a.attname FROM pg_index i
JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY k.ord"""

# Types whose binary COPY form is the same bytes on any PostgreSQL server (no OIDs inside, unlike arrays, records
# and user-defined types), by the name format_type() gives them without a size.
_BINARY_SAFE = frozenset({
    "smallint", "integer", "bigint", "real", "double precision", "numeric", "text", "character varying",
    "character", "boolean", "date", "time without time zone", "time with time zone", "timestamp without time zone",
    "timestamp with time zone", "interval", "bytea", "uuid", "json", "jsonb"})


def binary_copy(schema: TableSchema, target: TargetFormat) -> bool:
    """Whether a split's rows can go from the source's COPY TO into the staging COPY in the binary format: every
    staging column is declared as the source column itself (PostgreSQL to PostgreSQL), of a built-in type whose
    binary form holds no OID. Binary input reads a value's bytes without parsing text, on both sides (docs/benchmarks/snapshot.md)."""
    return target.db_type == "postgres" and all(
        target.declared(c, c.name in schema.primary_key) == c.native
        and re.sub(r"\(\d+(,\d+)?\)", "", c.native) in _BINARY_SAFE for c in schema.columns)


# What the JDBC export's session has (PgJDBC sets DateStyle ISO, extra_float_digits 3 and UTF8; the driver JVM's
# time zone is UTC), so `COPY ... TO` renders every value as the JDBC path's COPY line does. IntervalStyle,
# lc_monetary and bytea_output are the server's in both (bytea is rendered by encode()).
_COPY_OUT_SESSION = "-c TimeZone=UTC -c DateStyle=ISO -c extra_float_digits=3 -c client_encoding=UTF8"
_UNIQUE_SQL = """
SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE i.indrelid = %s::regclass AND i.indisunique AND i.indnkeyatts = 1 AND a.attname = %s"""


class PostgresSource(SqlSource):
    db_type = "postgres"

    def __init__(self, url: DbUrl, pipe: bool = True) -> None:
        """`pipe`: a PostgreSQL target's splits may be piped `COPY` to `COPY` (`export`)."""
        if not url.database:
            raise SourceSetupError(f"source url {url} names no database", "add it: postgresql://user@host:5432/<database>")
        self.url = url
        self.conn = connect(url)
        self.probes = KeyProbes(self.conn, self.db_type)
        self.pipe = pipe

    def check_capture(self) -> list[str]:
        with self.conn.cursor() as cur:
            cur.execute("SHOW wal_level")
            level = cur.fetchone()[0]
        if level != "logical":
            raise SourceSetupError(
                f"wal_level is '{level}' on {self.url}",
                "set wal_level = logical in postgresql.conf and restart PostgreSQL")
        return []  # WAL is kept for the slot: no retention to report

    def describe(self, table: TableId, split_column: str | None = None) -> TableSchema:
        regclass = self.table_sql(table)
        with self.conn.cursor() as cur:
            cur.execute("SELECT to_regclass(%s)", (regclass,))
            if cur.fetchone()[0] is None:
                raise TableMissing(f"table {table} does not exist on {self.url}", MISSING_TABLE_HINT)
            cur.execute(_COLUMNS_SQL, (regclass,))
            columns = tuple(types.column_from_catalog(*row) for row in cur.fetchall())
            cur.execute(_PK_SQL, (regclass,))
            pk = tuple(r[0] for r in cur.fetchall())
        schema = resolve_key(table, columns, pk, split_column, lambda c: self._is_unique(regclass, c))
        return replace(schema, storage=storage(self.conn, regclass))

    def added_fill(self, change: SchemaChange, names: list[str], before: TableSchema) -> AddedFill:
        return added_fill(self.conn, self.table_sql(change.table), names, before.storage)

    def _is_unique(self, regclass: str, column: str) -> bool:
        with self.conn.cursor() as cur:
            cur.execute(_UNIQUE_SQL, (regclass, column))
            return cur.fetchone() is not None

    def current_position(self) -> PgPosition:
        with self.conn.cursor() as cur:
            cur.execute("SELECT pg_current_wal_lsn()::text")
            return PgPosition.parse_lsn(cur.fetchone()[0])

    def key_stats(self, schema: TableSchema, kind: str) -> KeyStats:
        lo, hi = self.probes.min_max(schema, kind)
        estimate = int(self.probes.scalar("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
                                          (self.table_sql(schema.table),)) or -1)
        # reltuples is -1 before the first ANALYZE/VACUUM: count instead.
        rows = estimate if estimate > 0 else self.probes.count(schema.table)
        return KeyStats(lo, hi, rows)

    def export(self, plan: SplitPlan, schema: TableSchema, splits: list[Split], target: TargetFormat) -> RowExport:
        """A PostgreSQL target: one `COPY (SELECT ...) TO STDOUT` per split, each field rendered as the JDBC
        export's COPY line renders it but left for COPY to escape, so the text is the same bytes; a Spark task
        pipes it into the staging COPY (spark/copy_pipe.py). Any other target: the JDBC export."""
        if not self.pipes_copy(target):
            return super().export(plan, schema, splits, target)
        table = self.table_sql(schema.table)
        binary = binary_copy(schema, target)
        if binary:
            fields, options = ", ".join(self.quote(c.name) for c in schema.columns), " (FORMAT binary)"
        else:
            fields = ", ".join(types.copy_field(c, self.quote(c.name), escaped=False) for c in schema.columns)
            options = ""
        statements = tuple(f"COPY (SELECT {s.index}, {fields} FROM {table} WHERE {p}) TO STDOUT{options}"
                           for s, p in zip(splits, self.split_predicates(plan, splits)))
        args = {**postgres_args(self.url), "options": _COPY_OUT_SESSION}
        transports = tuple(Transport(c, as_text=False) for c in schema.columns)  # staged in the target's types
        return RowExport(target.rows, CopyOutExport(args, statements, binary), transports)

    def pipes_copy(self, target: TargetFormat) -> bool:
        """Whether `export` pipes each split `COPY` to `COPY` for this target (no Spark JDBC read)."""
        return self.pipe and target.rows == RowFormat.COPY_TEXT and target.db_type == "postgres"

    def jdbc(self) -> JdbcEndpoint:
        return postgres_jdbc(self.url, write=False)

    row_versions = True

    def changed_since(self, schema: TableSchema, key_range: KeyRange, kind: str, target: TargetFormat,
                      read: SplitRead, rows_per_second: int = 0) -> set[tuple]:
        return changed_versions(self.url, schema, key_range, kind, self.compared_columns(schema, target),
                                read.versions or {}, self.conn, rows_per_second)

    def compared_columns(self, schema: TableSchema, target: TargetFormat) -> list[str]:
        # A MySQL target holds what PostgreSQL rendered as text for it (interval, money, ranges, arrays...):
        # compared as that text, by the snapshot's own expressions.
        if target.db_type == "mysql":
            return [types.compared_for_mysql(c, self.quote(c.name)) for c in schema.columns]
        return [types.compared_expr(c, self.quote(c.name)) for c in schema.columns]

    def select_expr(self, column: Column, target_db_type: str) -> tuple[str, bool]:
        return types.select_expr(column, self.quote(column.name), target_db_type)

    def copy_line(self, columns: list[Column], tag_sql: str, declared) -> str:
        return types.copy_line([f"({tag_sql})::text"] + [types.copy_field(c, self.quote(c.name)) for c in columns])

    def close(self) -> None:
        self.conn.close()

