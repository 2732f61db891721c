"""What every relational source offers the planner and the snapshot, whatever its log protocol: the split plan
from key probes, the export of a group of splits as one JDBC query, and the exact lookup of keys."""
from __future__ import annotations

import math
import uuid
from datetime import datetime, timezone

from cdc_assets.core.boundary import (SPLIT_COLUMN, JdbcExport, KeyStats, RowExport, RowFormat, TargetFormat,
                                      Transport)
from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.keys import key_kind, range_predicate, to_key_value, to_param
from cdc_assets.core.splits import KeyRange, KeyValue, Split, SplitPlan
from cdc_assets.core.tables import Column, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect, qualified, quote_ident
from cdc_assets.errors import CdcError, TableError
from cdc_assets.sources.split_hold import LOCK_WAIT_SECS, hold_range
from cdc_assets.sources.split_read import SplitRead, read_range

EVEN_FACTOR = (0.05, 1000.0)
PRESENT_CHUNK = 1000  # keys per lookup in present_keys


class SqlSource:
    """A `SnapshotSource` over SQL (MySQL, PostgreSQL). The engines fill in `db_type`, `url`, `conn`,
    `key_stats`, `jdbc`, `select_expr` and `copy_line`; the rest is shared SQL both accept."""

    db_type: str
    url: DbUrl
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

    # -- planning
    def plan(self, schema: TableSchema, split_size: int) -> SplitPlan:
        """Integer keys split evenly when their distribution allows it ((max-min+1)/rows within [0.05, 1000], the
        rule Flink CDC and ape-dts use); every other key is cut by next-boundary queries, which read the key
        index only."""
        kind = key_kind(schema.split_column)
        stats = self.key_stats(schema, kind)
        if stats.min is None:
            boundaries: list[KeyValue] = []
        elif kind == "int" and EVEN_FACTOR[0] <= (stats.max - stats.min + 1) / max(stats.rows, 1) <= EVEN_FACTOR[1]:
            step = max(1, math.ceil(split_size * (stats.max - stats.min + 1) / max(stats.rows, 1)))
            boundaries = list(range(stats.min + step, stats.max + 1, step))
        else:
            boundaries = self._probe_boundaries(schema, kind, split_size, stats.min)
        return SplitPlan(
            table=schema.table, split_column=schema.split_column.name, key_kind=kind, boundaries=tuple(boundaries),
            estimated_rows=_estimates(stats.rows, len(boundaries) + 1, split_size),
            created_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f"),
        )

    def _probe_boundaries(self, schema: TableSchema, kind: str, split_size: int, first: KeyValue) -> list[KeyValue]:
        """Each boundary is the key `split_size` rows past the previous one; a run of equal split-column
        values longer than a split moves the boundary to the next distinct value, so it is never cut."""
        boundaries: list[KeyValue] = []
        start: KeyValue | None = None
        while True:
            boundary = self.key_at_offset(schema, kind, start, split_size)
            if boundary is not None and boundary == (first if start is None else start):
                boundary = self.next_key_after(schema, kind, boundary)
            if boundary is None:
                return boundaries
            boundaries.append(boundary)
            start = boundary

    def _scalar(self, sql: str, params: tuple = ()):
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            row = cur.fetchone()
        return None if row is None else row[0]

    def key_at_offset(self, schema: TableSchema, kind: str, start: KeyValue | None, offset: int) -> KeyValue | None:
        """The split-column value `offset` rows after `start` (inclusive) in key order, or None past the end."""
        k = self.quote(schema.split_column.name)
        where, params = (f"WHERE {k} >= %s ", (to_param(start, kind),)) if start is not None else ("", ())
        value = self._scalar(f"SELECT {k} FROM {self.table_sql(schema.table)} {where}ORDER BY {k} LIMIT 1 OFFSET {offset}", params)
        return None if value is None else to_key_value(value, kind)

    def next_key_after(self, schema: TableSchema, kind: str, value: KeyValue) -> KeyValue | None:
        k = self.quote(schema.split_column.name)
        found = self._scalar(f"SELECT MIN({k}) FROM {self.table_sql(schema.table)} WHERE {k} > %s", (to_param(value, kind),))
        return None if found is None else to_key_value(found, kind)

    def _min_max(self, schema: TableSchema, kind: str) -> tuple[KeyValue | None, KeyValue | None]:
        k = self.quote(schema.split_column.name)
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT MIN({k}), MAX({k}) FROM {self.table_sql(schema.table)}")
            lo, hi = cur.fetchone()
        return (None if lo is None else to_key_value(lo, kind)), (None if hi is None else to_key_value(hi, kind))

    def _count(self, table: TableId) -> int:
        return int(self._scalar(f"SELECT COUNT(*) FROM {self.table_sql(table)}"))

    # -- the snapshot's read
    def split_predicates(self, plan: SplitPlan, splits: list[Split]) -> tuple[str, ...]:
        """Each split's key range as SQL the source evaluates, in the group's order."""
        key = self.quote(plan.split_column)
        return tuple(range_predicate(key, s.range, plan.key_kind, self.db_type) for s in splits)

    def export(self, plan: SplitPlan, schema: TableSchema, splits: list[Split], target: TargetFormat) -> RowExport:
        """One query for the group, tagging each row with its split index, and one range predicate per split.

        The source evaluates both, so its collation decides which split a key belongs to. COPY_TEXT: the source
        renders each row as one COPY line, and Spark carries one string column (the JVM decodes one value per
        row instead of one per column, most of a snapshot's CPU); COLUMNS: typed columns, some kinds as text."""
        key = self.quote(plan.split_column)
        predicates = self.split_predicates(plan, splits)
        tag = "CASE " + " ".join(f"WHEN {p} THEN {s.index}" for s, p in zip(splits, predicates)) + " END"
        if target.rows == RowFormat.COPY_TEXT:
            declared = lambda c: target.declared(c, c.name in schema.primary_key)  # noqa: E731
            # The split column stays selected: Spark's predicates filter on it outside the subquery.
            selected = f"{self.copy_line(list(schema.columns), tag, declared)} AS line, {key}"
            transports = tuple(Transport(c, as_text=False) for c in schema.columns)  # staged in the target's types
        else:
            exprs = [(c, *self.select_expr(c, target.db_type)) for c in schema.columns]
            selected = f"{tag} AS {SPLIT_COLUMN}, " + ", ".join(f"{sql} AS {self.quote(c.name)}" for c, sql, _ in exprs)
            transports = tuple(Transport(c, as_text) for c, _, as_text in exprs)
        query = f"SELECT {selected} FROM {self.table_sql(schema.table)}"
        return RowExport(target.rows, JdbcExport(self.jdbc(), query, predicates), transports)

    def export_together(self, plan: SplitPlan, schema: TableSchema, splits: list[Split],
                        targets: list[TargetFormat]) -> list[RowExport]:
        """One query selecting every format the targets ask for: a COPY line per PostgreSQL-like format, and the
        typed columns of at most one COLUMNS format (their names are the staging table's); a second COLUMNS
        format gets a read of its own. Targets of one engine (db_type and row format) share their export."""
        kinds: dict[tuple, TargetFormat] = {}
        for t in targets:
            kinds.setdefault((t.db_type, t.rows), t)
        lines = [k for k, t in kinds.items() if t.rows == RowFormat.COPY_TEXT]
        typed = [k for k, t in kinds.items() if t.rows == RowFormat.COLUMNS]
        alone = {k: self.export(plan, schema, splits, kinds[k]) for k in typed[1:]}
        key = self.quote(plan.split_column)
        predicates = self.split_predicates(plan, splits)
        tag = "CASE " + " ".join(f"WHEN {p} THEN {s.index}" for s, p in zip(splits, predicates)) + " END"
        selected, shapes = [], {}
        for i, k in enumerate(lines):
            target = kinds[k]
            declared = lambda c, t=target: t.declared(c, c.name in schema.primary_key)  # noqa: E731
            selected.append(f"{self.copy_line(list(schema.columns), tag, declared)} AS _cdc_line_{i}")
            shapes[k] = (tuple(Transport(c, as_text=False) for c in schema.columns), (f"_cdc_line_{i}",))
        if typed:
            exprs = [(c, *self.select_expr(c, typed[0][0])) for c in schema.columns]
            selected.append(f"{tag} AS {SPLIT_COLUMN}")
            selected += [f"{sql} AS {self.quote(c.name)}" for c, sql, _ in exprs]
            shapes[typed[0]] = (tuple(Transport(c, as_text) for c, _, as_text in exprs),
                                (SPLIT_COLUMN, *(c.name for c in schema.columns)))
        else:
            selected.append(key)  # Spark's predicates filter on it outside the subquery
        how = JdbcExport(self.jdbc(), f"SELECT {', '.join(selected)} FROM {self.table_sql(schema.table)}", predicates)
        out = []
        for t in targets:
            k = (t.db_type, t.rows)
            if k in alone:
                out.append(alone[k])
            else:
                transports, columns = shapes[k]
                out.append(RowExport(t.rows, how, transports, columns))
        return out

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
                          versions=self.row_versions, rows_per_second=rows_per_second)

    def changed_since(self, schema: TableSchema, key_range: KeyRange, kind: str, target: TargetFormat,
                      read: SplitRead) -> set[tuple]:
        """With `row_versions`: the keys of the range whose row changed since `read` (values as read)."""
        raise NotImplementedError

    def compared_columns(self, schema: TableSchema, target: TargetFormat) -> list[str]:
        """Each column as verification reads it: as stored, unless a source renders it for that target."""
        return [self.quote(c.name) for c in schema.columns]

    # -- after the read
    def present_keys(self, schema: TableSchema, keys: list[tuple]) -> set[tuple]:
        """Which of `keys` the source table holds now, compared exactly: text byte for byte, since a case- or
        accent-insensitive collation would call 'abc' and 'ABC' one key. Keys come back as `keys` gave them.
        On a connection of its own: the snapshot's commit thread asks, beside the reading thread."""
        exact = {c.name for c in schema.columns if self.exact_key(c)}
        cols = ", ".join(("BINARY " if k in exact else "") + self.quote(k) for k in schema.primary_key)
        one = "(" + ", ".join("BINARY %s" if k in exact else "%s" for k in schema.primary_key) + ")"
        by_norm = {tuple(map(_comparable, key)): key for key in keys}
        found: set[tuple] = set()
        conn = connect(self.url)
        try:
            with conn.cursor() as cur:
                for i in range(0, len(keys), PRESENT_CHUNK):
                    chunk = keys[i:i + PRESENT_CHUNK]
                    cur.execute(f"SELECT {cols} FROM {self.table_sql(schema.table)} "
                                f"WHERE ({cols}) IN ({', '.join([one] * len(chunk))})", [v for key in chunk for v in key])
                    found.update(by_norm[n] for row in cur.fetchall() if (n := tuple(map(_comparable, row))) in by_norm)
        finally:
            conn.close()
        return found


def _estimates(rows: int, count: int, split_size: int) -> tuple[int, ...]:
    if count == 1:
        return (rows,)
    each = min(split_size, math.ceil(rows / count))
    return tuple([each] * (count - 1) + [max(rows - each * (count - 1), 0)])


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


def _comparable(value):
    """One form for a key value, whichever driver and engine returned it."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value)
        try:
            return value.decode("utf-8")  # MySQL returns BINARY-compared text as bytes
        except UnicodeDecodeError:
            return value
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
