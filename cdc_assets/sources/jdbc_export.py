"""The export of a group of splits as one JDBC query that Spark reads: each row tagged with its split's index, and
one range predicate per split, both evaluated by the source, so its collation decides which split a key belongs
to. A source renders the SQL (`SqlRendering`); these functions put the query together."""
from __future__ import annotations

from typing import Protocol

from cdc_assets.core.boundary import SPLIT_COLUMN, JdbcExport, RowExport, RowFormat, TargetFormat, Transport
from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.keys import range_predicate
from cdc_assets.core.splits import Split, SplitPlan
from cdc_assets.core.tables import Column, TableId, TableSchema


class SqlRendering(Protocol):
    """What the export asks of a SQL source: its endpoint, its quoting, its rendering of a column, and its own
    export of one format (which may be no JDBC query: a pipe)."""

    db_type: str

    def jdbc(self) -> JdbcEndpoint: ...

    def quote(self, name: str) -> str: ...

    def table_sql(self, table: TableId) -> str: ...

    def select_expr(self, column: Column, target_db_type: str) -> tuple[str, bool]: ...

    def copy_line(self, columns: list[Column], tag_sql: str, declared) -> str: ...

    def export(self, plan: SplitPlan, schema: TableSchema, splits: list[Split], target: TargetFormat) -> RowExport: ...


def split_predicates(source: SqlRendering, plan: SplitPlan, splits: list[Split]) -> tuple[str, ...]:
    """Each split's key range as SQL the source evaluates, in the group's order."""
    key = source.quote(plan.split_column)
    return tuple(range_predicate(key, s.range, plan.key_kind, source.db_type) for s in splits)


def export(source: SqlRendering, plan: SplitPlan, schema: TableSchema, splits: list[Split],
           target: TargetFormat) -> RowExport:
    """One query for the group in `target`'s format. COPY_TEXT: the source renders each row as one COPY line, and
    Spark carries one string column (the JVM decodes one value per row instead of one per column, most of a
    snapshot's CPU); COLUMNS: typed columns, some kinds as text."""
    key = source.quote(plan.split_column)
    predicates = split_predicates(source, plan, splits)
    tag = _split_tag(splits, predicates)
    if target.rows == RowFormat.COPY_TEXT:
        declared = lambda c: target.declared(c, c.name in schema.primary_key)  # noqa: E731
        # The split column stays selected: Spark's predicates filter on it outside the subquery.
        selected = f"{source.copy_line(list(schema.columns), tag, declared)} AS line, {key}"
        transports = tuple(Transport(c, as_text=False) for c in schema.columns)  # staged in the target's types
    else:
        exprs = [(c, *source.select_expr(c, target.db_type)) for c in schema.columns]
        selected = f"{tag} AS {SPLIT_COLUMN}, " + ", ".join(f"{sql} AS {source.quote(c.name)}" for c, sql, _ in exprs)
        transports = tuple(Transport(c, as_text) for c, _, as_text in exprs)
    query = f"SELECT {selected} FROM {source.table_sql(schema.table)}"
    return RowExport(target.rows, JdbcExport(source.jdbc(), query, predicates), transports)


def export_together(source: SqlRendering, plan: SplitPlan, schema: TableSchema, splits: list[Split],
                    targets: list[TargetFormat]) -> list[RowExport]:
    """One query selecting every format the targets ask for: a COPY line per PostgreSQL-like format, and the
    typed columns of at most one COLUMNS format (their names are the staging table's); a second COLUMNS
    format gets a read of its own (`alone`, the source's own export). Targets of one engine (db_type and row
    format) share their export."""
    kinds: dict[tuple, TargetFormat] = {}
    for t in targets:
        kinds.setdefault((t.db_type, t.rows), t)
    lines = [k for k, t in kinds.items() if t.rows == RowFormat.COPY_TEXT]
    typed = [k for k, t in kinds.items() if t.rows == RowFormat.COLUMNS]
    alone = {k: source.export(plan, schema, splits, kinds[k]) for k in typed[1:]}
    key = source.quote(plan.split_column)
    predicates = split_predicates(source, plan, splits)
    tag = _split_tag(splits, predicates)
    selected, shapes = [], {}
    for i, k in enumerate(lines):
        target = kinds[k]
        declared = lambda c, t=target: t.declared(c, c.name in schema.primary_key)  # noqa: E731
        selected.append(f"{source.copy_line(list(schema.columns), tag, declared)} AS _cdc_line_{i}")
        shapes[k] = (tuple(Transport(c, as_text=False) for c in schema.columns), (f"_cdc_line_{i}",))
    if typed:
        exprs = [(c, *source.select_expr(c, typed[0][0])) for c in schema.columns]
        selected.append(f"{tag} AS {SPLIT_COLUMN}")
        selected += [f"{sql} AS {source.quote(c.name)}" for c, sql, _ in exprs]
        shapes[typed[0]] = (tuple(Transport(c, as_text) for c, _, as_text in exprs),
                            (SPLIT_COLUMN, *(c.name for c in schema.columns)))
    else:
        selected.append(key)  # Spark's predicates filter on it outside the subquery
    how = JdbcExport(source.jdbc(), f"SELECT {', '.join(selected)} FROM {source.table_sql(schema.table)}", predicates)
    out = []
    for t in targets:
        k = (t.db_type, t.rows)
        if k in alone:
            out.append(alone[k])
        else:
            transports, columns = shapes[k]
            out.append(RowExport(t.rows, how, transports, columns))
    return out


def _split_tag(splits: list[Split], predicates: tuple[str, ...]) -> str:
    """SQL giving a row its split's index."""
    return "CASE " + " ".join(f"WHEN {p} THEN {s.index}" for s, p in zip(splits, predicates)) + " END"
