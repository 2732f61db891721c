"""A log batch into a PostgreSQL target: deletes, full rows and partial rows of one table, as VALUES statements
(delete by key, then insert, or an upsert where the table allows it) or, for a large batch, through COPY
(copy_rows.py); key moves as copies of the old keys' rows (moves.py)."""
from __future__ import annotations

from typing import Any, Callable

from psycopg2.extras import execute_values

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.tables import TableSchema
from cdc_assets.sinks.copy_rows import (COPY_MIN_ROWS, NotCopied, column_renderer, copied_into, copy_lines, rows_texts,
                                        stage)
from cdc_assets.sinks.moves import Moves, plan_moves
from cdc_assets.sinks.postgres_lookups import CatalogLookups
from cdc_assets.sinks.postgres_values import log_values, refuse_nul

PAGE_ROWS = 5000  # rows per statement
PAGE_BYTES = 64 << 20  # rough text size per statement: far below PostgreSQL's 1 GB limit on one message


class PostgresBatches:
    """The log batches of one PostgreSQL sink, in the dialect it declares (`q`, `table_sql`, `column_type`), with
    what `lookups` read of each table's catalog."""

    def __init__(self, sink, lookups: CatalogLookups) -> None:
        self.sink = sink
        self.lookups = lookups

    def types(self, schema: TableSchema) -> dict[str, str]:
        return {c.name: self.sink.column_type(c, c.name in schema.primary_key) for c in schema.columns}

    def prepare(self, schema: TableSchema, changes: TableChanges) -> None:
        """Render the full rows' COPY text now, while the target still applies the batch before (the engine's
        applier runs one batch ahead): `apply` then only sends it."""
        if len(changes.rows) < COPY_MIN_ROWS:
            return
        try:
            changes.prepared = rows_texts(schema, self.types(schema), changes)
        except NotCopied:
            pass  # apply meets it again, and takes the VALUES path

    def apply(self, cursor, schema: TableSchema, changes: TableChanges) -> None:
        q = self.sink.q
        table, key = self.sink.table_sql(schema.table), schema.primary_key
        types = self.types(schema)
        casts = self.lookups.casts(cursor, schema, types)

        def values(names) -> tuple[str, str]:
            # Explicit casts: the log's Python values (bit strings, JSON text, ints for booleans) become the
            # column's type exactly as the snapshot's text would. CAST, not `::`: `-32768::smallint` parses as
            # -(32768::smallint), out of range.
            return (", ".join(q(n) for n in names),
                    "(" + ", ".join(f"CAST(%s AS {casts[n]})" for n in names) + ")")

        if self.sink.source_db_type == "mysql":
            refuse_nul(schema, changes)
        param = log_values(schema, types)
        match = " AND ".join(f"t.{q(k)} = v.{q(k)}" for k in key)
        moves = plan_moves(cursor, schema, changes, self.sink.move_marks, self.target_row, self.sink.url)
        gone = [*changes.deletes, *changes.rows, *moves.copies]
        others = [*changes.deletes, *moves.copies]
        upsert = bool(changes.rows) and self.lookups.upserts(cursor, schema)
        if len(gone) < COPY_MIN_ROWS or not self._copy_rows(cursor, schema, types, casts, others, changes, upsert):
            names = [c.name for c in schema.columns]
            rows = [tuple(param(n, row.get(n)) for n in names) for row in changes.rows.values()]
            if doomed := others if upsert else gone:
                cols, template = values(key)
                _execute(cursor, f"DELETE FROM {table} AS t USING (VALUES %s) AS v({cols}) WHERE {match}", doomed,
                         template)
            if rows:
                cols, template = values(names)
                _execute(cursor, f"INSERT INTO {table} AS t ({cols}) VALUES %s{self._on_conflict(schema, upsert)}",
                         rows, template)
        if moves.copies:
            self._insert_copies(cursor, schema, moves, values)
        for names, rows in _by_columns({**changes.partial, **moves.updates}, key, param).items():
            cols, template = values(names)
            sets = ", ".join(f"{q(n)} = v.{q(n)}" for n in names if n not in key)
            _execute(cursor, f"UPDATE {table} AS t SET {sets} FROM (VALUES %s) AS v({cols}) WHERE {match}", rows,
                     template)

    def _copy_rows(self, cursor, schema: TableSchema, types: dict[str, str], casts: dict[str, str],
                   others: list[tuple], changes: TableChanges, upsert: bool) -> bool:
        """Delete the keys of `others` (and of the full rows unless `upsert`), then insert the full rows, through
        temporary tables filled by COPY (see copy_rows.py); False, with nothing done, when a value cannot go
        through COPY text. The fresh rows go by COPY straight into the table where that is sure to stop at a key
        already there (`CatalogLookups.copies_fresh`)."""
        q = self.sink.q
        table, key, names = self.sink.table_sql(schema.table), schema.primary_key, [c.name for c in schema.columns]
        try:
            fresh_text, rows_text = (changes.prepared if changes.prepared is not None
                                     else rows_texts(schema, types, changes))
            others_text = copy_lines(others, [column_renderer(types[k]) for k in key])
        except NotCopied:
            return False
        # Not while the log replays what the snapshot may hold already: most of those keys are there.
        if fresh_text and not (upsert and changes.replaying_until is None
                               and self.lookups.copies_fresh(cursor, schema, types)
                               and copied_into(cursor, table, [q(n) for n in names], fresh_text)):
            rows_text += fresh_text
        cast = lambda n: f"CAST(v.{q(n)} AS {casts[n]})"  # noqa: E731 - as the VALUES template casts
        match = " AND ".join(f"t.{q(k)} = {cast(k)}" for k in key)
        staged = [(name, columns, text) for name, columns, text in
                  (("_cdc_rows", names, rows_text), ("_cdc_gone", key, others_text)) if text]
        for name, columns, text in staged:
            stage(cursor, name, [q(n) for n in columns], text)
            if name == "_cdc_gone" or not upsert:
                cursor.execute(f"DELETE FROM {table} AS t USING {name} AS v WHERE {match}")
        if rows_text:
            cursor.execute(f"INSERT INTO {table} AS t ({', '.join(q(n) for n in names)}) "
                           f"SELECT {', '.join(cast(n) for n in names)} FROM _cdc_rows AS v"
                           f"{self._on_conflict(schema, upsert)}")
        if staged:
            cursor.execute(f"DROP TABLE {', '.join(name for name, _, _ in staged)}")  # a batch may hold more tables
        return True

    def _on_conflict(self, schema: TableSchema, upsert: bool) -> str:
        """For an INSERT whose table is aliased (`AS t`): a table named `excluded` would make EXCLUDED ambiguous."""
        if not upsert:
            return ""
        q = self.sink.q
        sets = ", ".join(f"{q(c.name)} = EXCLUDED.{q(c.name)}" for c in schema.columns
                         if c.name not in schema.primary_key)
        return (f" ON CONFLICT ({', '.join(q(k) for k in schema.primary_key)}) "
                f"{f'DO UPDATE SET {sets}' if sets else 'DO NOTHING'}")

    def target_row(self, cursor, schema: TableSchema, key: tuple) -> tuple | None:
        """The target's row under `key` (moves.py): as text, since every PostgreSQL type reads back exactly
        through its text form and the `%s::type` casts."""
        q, column_type = self.sink.q, self.sink.column_type
        types = self.lookups.casts(cursor, schema, {k: column_type(schema.column(k), True) for k in schema.primary_key})
        cursor.execute(f"SELECT {', '.join(f'{q(c.name)}::text' for c in schema.columns)} "
                       f"FROM {self.sink.table_sql(schema.table)} WHERE "
                       + " AND ".join(f"{q(k)} = CAST(%s AS {types[k]})" for k in schema.primary_key), key)
        return cursor.fetchone()

    def _insert_copies(self, cursor, schema: TableSchema, moves: Moves, values) -> None:
        """The old keys' rows (text) under their new keys (log values), before the moves' columns update them."""
        names, key = [c.name for c in schema.columns], schema.primary_key
        cols, template = values(names)
        rows = [tuple(new[key.index(n)] if n in key else row[i] for i, n in enumerate(names))
                for new, row in moves.copies.items()]
        _execute(cursor, f"INSERT INTO {self.sink.table_sql(schema.table)} ({cols}) VALUES %s", rows, template)


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
