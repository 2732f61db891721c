"""PostgreSQL as a target: type mapping, staging (UNLOGGED), and applying rows as delete by key, then insert."""
from __future__ import annotations

import io
from decimal import Decimal
from functools import cached_property, partial
from itertools import repeat
from typing import Any, Callable

import psycopg2
from psycopg2.extras import execute_values

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.boundary import CopyWrite, RowExport, RowFormat, TargetFormat, Transport
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.dbapi.connect import postgres_args
from cdc_assets.errors import NulInText, TableError
from cdc_assets.sinks.base import Moves, SqlSink
from cdc_assets.sinks.copy_rows import COPY_MIN_ROWS, NotCopied, column_renderer, copy_columns, copy_lines, stage
from cdc_assets.sinks.image_sql import PostgresImageSql
from cdc_assets.sinks.postgres_types import kind_to_postgres, unconstrained_types

PAGE_ROWS = 5000  # rows per statement
PAGE_BYTES = 64 << 20  # rough text size per statement: far below PostgreSQL's 1 GB limit on one message

class PostgresSink(SqlSink):
    db_type = "postgres"
    text_type = meta_key_type = "text"  # a text key compares byte for byte: a database's collation is deterministic
    images = PostgresImageSql()
    # Groups' ranges are disjoint and PostgreSQL locks rows, not gaps: two merges run side by side, so the second
    # core works while the last reads' commits would otherwise queue behind one backend.
    concurrent_commits = 2

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
    def _unique_keys(self) -> dict[TableId, bool]:
        return {}  # see _upserts

    @cached_property
    def _fresh_copies(self) -> dict[TableId, bool]:
        return {}  # see _copies_fresh

    @cached_property
    def _cast_types(self) -> dict[TableId, dict[str, str]]:
        return {}  # see _casts

    @cached_property
    def has_postgis(self) -> bool:
        with self.catalog() as cur:
            cur.execute("SELECT 1 FROM pg_extension WHERE extname = 'postgis'")
            return cur.fetchone() is not None

    def ensure_table(self, schema: TableSchema) -> bool:
        self._check_types(schema)
        self._unique_keys.pop(schema.table, None)
        self._fresh_copies.pop(schema.table, None)
        self._cast_types.pop(schema.table, None)
        return super().ensure_table(schema)

    def add_columns(self, schema: TableSchema, columns: list[Column]) -> None:
        self._cast_types.pop(schema.table, None)
        super().add_columns(schema, columns)

    def column_capacities(self, table: TableId, fresh: bool = False) -> dict:
        if fresh:
            self._cast_types.pop(table, None)  # the casts follow what the capacities say
        return super().column_capacities(table, fresh)

    def alter_column_sql(self, table: TableId, column: Column) -> str:
        return f"ALTER TABLE {self.table_sql(table)} ALTER COLUMN {self.q(column.name)} TYPE {self.column_type(column, False)}"

    def _casts(self, cursor, schema: TableSchema, types: dict[str, str]) -> dict[str, str]:
        """The type each log value is cast to: the target column's own type (its catalog, as `column_capacities`
        read it) without its length, precision or scale. `CAST(x AS varchar(10))` cuts and `CAST(x AS integer)`
        rounds without an error; the column's assignment check raises instead, and the engine looked first at
        what it would round (core/fits.py)."""
        found = self._cast_types.get(schema.table)
        if found is None:
            found = self._cast_types[schema.table] = unconstrained_types(cursor, self.table_sql(schema.table))
        return {n: found.get(n, t) for n, t in types.items()}

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
        """Render the full rows' COPY text now, while the target still applies the batch before (the engine's
        applier runs one batch ahead): `apply_changes` then only sends it."""
        super().prepare_changes(schema, changes)
        if len(changes.rows) < COPY_MIN_ROWS:
            return
        try:
            changes.prepared = self._rows_texts(schema, self._types(schema), changes)
        except NotCopied:
            pass  # apply_changes meets it again, and takes the VALUES path

    def _types(self, schema: TableSchema) -> dict[str, str]:
        return {c.name: self.column_type(c, c.name in schema.primary_key) for c in schema.columns}

    def _rows_texts(self, schema: TableSchema, types: dict[str, str], changes: TableChanges) -> tuple[bytes, bytes]:
        """The COPY text of the fresh rows, and of the other full rows, in the schema's column order (NotCopied: a
        value COPY text cannot carry). The two texts together are every full row's."""
        names = [c.name for c in schema.columns]
        param = _log_values(schema, types)
        geometry = {c.name for c in schema.columns if c.kind == Kind.GEOMETRY}  # the only columns `param` converts
        renderers = [column_renderer(types[n], partial(param, n) if n in geometry else None) for n in names]
        rows, fresh = changes.rows, changes.fresh
        if not fresh:
            parts = ([], list(rows.values()))
        elif len(fresh) == len(rows):  # all of them: compaction keeps `fresh` within `rows`
            parts = (list(rows.values()), [])
        else:
            parts = ([], [])
            for key, row in rows.items():
                parts[key not in fresh].append(row)
        return tuple(copy_columns([list(map(dict.get, part, repeat(n))) for n in names], renderers) if part else b""
                     for part in parts)

    def apply_changes(self, cursor, schema: TableSchema, changes: TableChanges) -> None:
        table, key = self.table_sql(schema.table), schema.primary_key
        types = self._types(schema)
        casts = self._casts(cursor, schema, types)

        def values(names) -> tuple[str, str]:
            # Explicit casts: the log's Python values (bit strings, JSON text, ints for booleans) become the
            # column's type exactly as the snapshot's text would. CAST, not `::`: `-32768::smallint` parses as
            # -(32768::smallint), out of range.
            return (", ".join(self.q(n) for n in names),
                    "(" + ", ".join(f"CAST(%s AS {casts[n]})" for n in names) + ")")

        if self.source_db_type == "mysql":
            _refuse_nul(schema, changes)
        param = _log_values(schema, types)
        match = " AND ".join(f"t.{self.q(k)} = v.{self.q(k)}" for k in key)
        moves = self.plan_moves(cursor, schema, changes)
        gone = [*changes.deletes, *changes.rows, *moves.copies]
        others = [*changes.deletes, *moves.copies]
        upsert = bool(changes.rows) and self._upserts(cursor, schema)
        if len(gone) < COPY_MIN_ROWS or not self._copy_rows(cursor, schema, types, casts, others, changes, upsert):
            names = [c.name for c in schema.columns]
            rows = [tuple(param(n, row.get(n)) for n in names) for row in changes.rows.values()]
            if doomed := others if upsert else gone:
                cols, template = values(key)
                _execute(cursor, f"DELETE FROM {table} AS t USING (VALUES %s) AS v({cols}) WHERE {match}", doomed,
                         template)
            if rows:
                cols, template = values(names)
                _execute(cursor, f"INSERT INTO {table} AS t ({cols}) VALUES %s{self._on_conflict(schema, upsert)}", rows,
                         template)
        if moves.copies:
            self._insert_copies(cursor, schema, moves, values)
        for names, rows in _by_columns({**changes.partial, **moves.updates}, key, param).items():
            cols, template = values(names)
            sets = ", ".join(f"{self.q(n)} = v.{self.q(n)}" for n in names if n not in key)
            _execute(cursor, f"UPDATE {table} AS t SET {sets} FROM (VALUES %s) AS v({cols}) WHERE {match}", rows,
                     template)

    def _copy_rows(self, cursor, schema: TableSchema, types: dict[str, str], casts: dict[str, str],
                   others: list[tuple], changes: TableChanges, upsert: bool) -> bool:
        """Delete the keys of `others` (and of the full rows unless `upsert`), then insert the full rows, through
        temporary tables filled by COPY (see copy_rows.py); False, with nothing done, when a value cannot go
        through COPY text. The fresh rows go by COPY straight into the table where that is sure to stop at a key
        already there (`_copies_fresh`)."""
        table, key, names = self.table_sql(schema.table), schema.primary_key, [c.name for c in schema.columns]
        try:
            fresh_text, rows_text = (changes.prepared if changes.prepared is not None
                                     else self._rows_texts(schema, types, changes))
            others_text = copy_lines(others, [column_renderer(types[k]) for k in key])
        except NotCopied:
            return False
        # Not while the log replays what the snapshot may hold already: most of those keys are there.
        if fresh_text and not (upsert and changes.replaying_until is None and self._copies_fresh(cursor, schema, types)
                               and _copied_into(cursor, table, [self.q(n) for n in names], fresh_text)):
            rows_text += fresh_text
        cast = lambda n: f"CAST(v.{self.q(n)} AS {casts[n]})"  # noqa: E731 - as the VALUES template casts
        match = " AND ".join(f"t.{self.q(k)} = {cast(k)}" for k in key)
        staged = [(name, columns, text) for name, columns, text in
                  (("_cdc_rows", names, rows_text), ("_cdc_gone", key, others_text)) if text]
        for name, columns, text in staged:
            stage(cursor, name, [self.q(n) for n in columns], text)
            if name == "_cdc_gone" or not upsert:
                cursor.execute(f"DELETE FROM {table} AS t USING {name} AS v WHERE {match}")
        if rows_text:
            cursor.execute(f"INSERT INTO {table} AS t ({', '.join(self.q(n) for n in names)}) "
                           f"SELECT {', '.join(cast(n) for n in names)} FROM _cdc_rows AS v"
                           f"{self._on_conflict(schema, upsert)}")
        if staged:
            cursor.execute(f"DROP TABLE {', '.join(name for name, _, _ in staged)}")  # a batch may hold more tables
        return True

    def _copies_fresh(self, cursor, schema: TableSchema, types: dict[str, str]) -> bool:
        """Whether fresh rows may go by COPY straight into the table: its columns are of the types the VALUES
        path casts to (COPY parses each text with the column's own input function, so the stored values are the
        same), and it is a table (not a view) without rules (COPY does not run them). Called only where `_upserts`:
        the key's unique index then stops a key already there."""
        if schema.table not in self._fresh_copies:
            names = [c.name for c in schema.columns]
            cursor.execute(f"CREATE TEMPORARY TABLE _cdc_shape ({', '.join(f'{self.q(n)} {types[n]}' for n in names)})"
                           " ON COMMIT DROP")
            cursor.execute(
                "SELECT COUNT(*) = %s AND bool_and(c.relkind IN ('r', 'p') AND NOT c.relhasrules) "
                "FROM pg_attribute s JOIN pg_attribute t "
                "ON t.attname = s.attname AND t.atttypid = s.atttypid AND t.atttypmod = s.atttypmod "
                "JOIN pg_class c ON c.oid = t.attrelid "
                "WHERE s.attrelid = '_cdc_shape'::regclass AND s.attnum > 0 AND t.attrelid = %s::regclass "
                "AND NOT t.attisdropped", (len(names), self.table_sql(schema.table)))
            self._fresh_copies[schema.table] = bool(cursor.fetchone()[0])
            cursor.execute("DROP TABLE _cdc_shape")
        return self._fresh_copies[schema.table]

    def _on_conflict(self, schema: TableSchema, upsert: bool) -> str:
        """For an INSERT whose table is aliased (`AS t`): a table named `excluded` would make EXCLUDED ambiguous."""
        if not upsert:
            return ""
        sets = ", ".join(f"{self.q(c.name)} = EXCLUDED.{self.q(c.name)}" for c in schema.columns
                         if c.name not in schema.primary_key)
        return (f" ON CONFLICT ({', '.join(self.q(k) for k in schema.primary_key)}) "
                f"{f'DO UPDATE SET {sets}' if sets else 'DO NOTHING'}")

    def _upserts(self, cursor, schema: TableSchema) -> bool:
        """Whether full rows replace the target's rows under their keys by INSERT ... ON CONFLICT (key) DO UPDATE:
        one statement instead of a DELETE and an INSERT (2.5 times less of the server's time for 10,000 rows).
        Only where the table's one unique index (or constraint) is on exactly the key columns, usable by ON
        CONFLICT (not partial, not deferred, no expressions): with another one, a row could collide with a row
        the batch replaces later, which DELETE + INSERT removes first. Tables this sink creates have just their
        key as primary key."""
        if schema.table not in self._unique_keys:
            cursor.execute(
                "SELECT COUNT(*) = 1 AND bool_and(i.indisunique AND i.indimmediate AND i.indisvalid "
                "AND i.indpred IS NULL AND i.indexprs IS NULL AND i.indnkeyatts = %s "
                "AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text) FROM pg_attribute a "
                "WHERE a.attrelid = i.indrelid AND a.attnum = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1])) = %s) "
                "FROM pg_index i WHERE i.indrelid = %s::regclass AND (i.indisunique OR i.indisexclusion)",
                (len(schema.primary_key), sorted(schema.primary_key), self.table_sql(schema.table)))
            self._unique_keys[schema.table] = bool(cursor.fetchone()[0])
        return self._unique_keys[schema.table]

    def target_row(self, cursor, schema: TableSchema, key: tuple) -> tuple | None:
        # As text: every PostgreSQL type reads back exactly through its text form and the `%s::type` casts.
        types = self._casts(cursor, schema, {k: self.column_type(schema.column(k), True) for k in schema.primary_key})
        cursor.execute(f"SELECT {', '.join(f'{self.q(c.name)}::text' for c in schema.columns)} "
                       f"FROM {self.table_sql(schema.table)} WHERE "
                       + " AND ".join(f"{self.q(k)} = CAST(%s AS {types[k]})" for k in schema.primary_key), key)
        return cursor.fetchone()

    def _insert_copies(self, cursor, schema: TableSchema, moves: Moves, values) -> None:
        """The old keys' rows (text) under their new keys (log values), before the moves' columns update them."""
        names, key = [c.name for c in schema.columns], schema.primary_key
        cols, template = values(names)
        rows = [tuple(new[key.index(n)] if n in key else row[i] for i, n in enumerate(names))
                for new, row in moves.copies.items()]
        _execute(cursor, f"INSERT INTO {self.table_sql(schema.table)} ({cols}) VALUES %s", rows, template)

    def relation_bytes(self, cursor, table: str, name: TableId) -> int:
        cursor.execute("SELECT pg_total_relation_size(%s::regclass)", (table,))
        return int(cursor.fetchone()[0])

    def existing_columns(self, table: TableId) -> set[str] | None:
        with self.catalog() as cur:
            cur.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                        (table.namespace, table.name))
            names = {r[0] for r in cur.fetchall()}
        return names or None


def _copied_into(cursor, table: str, columns: list[str], text: bytes) -> bool:
    """COPY `text` into `table` under a savepoint: False, with the savepoint rolled back, when a row's key is
    there already (a replay) or a value fails the column's input where the VALUES path's explicit cast may take
    it (a bit string of another length: the cast pads or cuts it); the caller then applies those rows as it
    applies the others."""
    cursor.execute("SAVEPOINT cdc_fresh")
    try:
        cursor.copy_expert(f"COPY {table} ({', '.join(columns)}) FROM STDIN", io.BytesIO(text), size=1 << 20)
    except (psycopg2.IntegrityError, psycopg2.DataError):
        cursor.execute("ROLLBACK TO SAVEPOINT cdc_fresh; RELEASE SAVEPOINT cdc_fresh")
        return False
    cursor.execute("RELEASE SAVEPOINT cdc_fresh")
    return True


def _execute(cursor, sql: str, rows: list[tuple], template: str) -> None:
    for page in _pages(rows):
        execute_values(cursor, sql, page, template=template, page_size=len(page))


def _pages(rows: list[tuple]) -> list[list[tuple]]:
    """`rows` cut into statements of at most PAGE_ROWS rows and about PAGE_BYTES of values (a row alone may be
    larger: it goes alone)."""
    pages, page, size = [], [], 0
    for row in rows:
        row_size = sum(_text_size(v) for v in row)
        if page and (len(page) == PAGE_ROWS or size + row_size > PAGE_BYTES):
            pages.append(page)
            page, size = [], 0
        page.append(row)
        size += row_size
    return pages + [page] if page else pages


def _text_size(value) -> int:
    """Roughly how long `value` is as SQL text: bytea travels as hex, multi-byte characters count once (the
    budget leaves room for that)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return 2 * len(value)
    if isinstance(value, (list, tuple)):
        return sum(_text_size(v) for v in value)
    return 16


def _by_columns(partial: dict[tuple, dict], key: tuple[str, ...], param: Callable[[str, Any], Any]
                ) -> dict[tuple[str, ...], list[tuple]]:
    """Partial rows grouped by the columns they carry (key first), one UPDATE per group."""
    groups: dict[tuple[str, ...], list[tuple]] = {}
    for row in partial.values():
        names = (*key, *sorted(n for n in row if n not in key))
        if len(names) > len(key):
            groups.setdefault(names, []).append(tuple(param(n, row[n]) for n in names))
    return groups


def _refuse_nul(schema: TableSchema, changes: TableChanges) -> None:
    """MySQL text may hold NUL (0x00), PostgreSQL text cannot: stop naming the row (docs/connectors/mysql.md, "Type mapping")."""
    for key, row in (*changes.rows.items(), *changes.partial.items()):
        for name, value in row.items():
            if isinstance(value, str) and "\0" in value:
                raise NulInText(schema.table, key, name)


def _log_values(schema: TableSchema, types: dict[str, str]) -> Callable[[str, Any], Any]:
    """(column, log value) -> the parameter the snapshot's COPY text matches: MySQL geometry (the binlog carries
    MySQL's form: a 4-byte little-endian SRID, then WKB) as its WKB, or for PostGIS as 'SRID=n;<hex WKB>'; floats as
    `_param` renders them."""
    geometry = {c.name for c in schema.columns if c.kind == Kind.GEOMETRY}

    def param(name: str, value: Any) -> Any:
        if name not in geometry or value is None:
            return _param(value)
        if types[name] == "geometry":
            return f"SRID={int.from_bytes(value[:4], 'little')};{value[4:].hex()}"
        return value[4:]
    return param


def _param(value):
    """A float as its shortest exact text: psycopg2 renders -0.0 as the numeric literal -0.0, whose sign the
    cast to real/double then loses (numeric has no negative zero). A Decimal infinity as its text: psycopg2
    renders every non-finite Decimal as 'NaN'."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal) and value.is_infinite():
        return str(value)
    return value
