"""DDL met in the log on a captured table, as its source classified it (SchemaChangeKind), and what the task does
about it under pipeline.schema_change_policy. The rule, in order:

1. HARMLESS (indexes, constraints, comments, table options, defaults): go on, under every policy.
2. Changes confined to columns the task does not capture (source.exclude_columns, or added earlier and left out):
   go on, under every policy.
3. TABLE_ONLY (a PostgreSQL table renamed, whose changes keep coming under its new name; a MySQL CREATE TABLE of
   the table that exists: IF NOT EXISTS, or a replay of the log from before its creation): go on under `ignore`.
4. Columns added: under `apply_add_columns` added to the target, with the value the rows there got at the ADD as
   its default (core/added_fill.py; a stop where the source cannot say what it was), and captured; under `ignore`
   left out, recorded as source.exclude_columns are (the target does not get them until a re-plan); under `halt`,
   stop. An added column a later DDL took away before the ADD was followed stops, under every policy.
5. Captured columns retyped: the source's new definitions are read, and followed (recorded, and the log read on
   with them) where the target's columns hold every value of them (core/fits.py `holds`), under every policy;
   otherwise stop, naming the statements that make the target hold them. Changing the target column is the way
   out: the next run reads the target's types anew and follows.
6. Anything else (a captured column dropped or renamed, the key, a truncate, a drop, a rename of a MySQL table,
   a statement not understood): stop, under every policy. A renamed table's stop names the way out: its new
   name in source.tables (a re-plan would look for the old one). `ignore` never lets a captured column's values be
   dropped, cut or rounded.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Callable

from cdc_assets.core.added_fill import AddedFill
from cdc_assets.core.boundary import Sink
from cdc_assets.core.events import SchemaChange, SchemaChangeKind
from cdc_assets.core.fits import Family, holds
from cdc_assets.core.tables import Column, TableId, TableSchema
from cdc_assets.errors import RENAMED_TABLE_WAY_OUT, REPLAN_HINT, CdcError, TableMissing

log = logging.getLogger("cdc_assets.incremental")
_K = SchemaChangeKind


class SchemaChangeHalted(CdcError):
    """DDL on a captured table met in the log that `pipeline.schema_change_policy` does not follow, with the
    statement and its position. Way out: the one its hint names: for a retyped column, the ALTER that makes the
    target's column hold the new definition; for a dropped or renamed column, the key, a truncate or anything not
    understood, a re-plan (docs/concepts/log-phase.md, "Schema changes")."""

    def __init__(self, change: SchemaChange, policy: str, hint: str = "", why: str = "") -> None:
        super().__init__(
            f"DDL on captured table {change.table} at {change.position} stops the incremental phase "
            f"(schema_change_policy {policy}){': ' + why if why else ''}: {change.statement}",
            hint or REPLAN_HINT)
        self.change = change


def settle(change: SchemaChange, schema: TableSchema | None, policy: str, sink: Sink,
           describe: Callable[[TableId], TableSchema],
           fill: Callable[[SchemaChange, list[str], TableSchema], AddedFill] = lambda change, names, before: AddedFill()
           ) -> TableSchema | None:
    """What the task reads the table with from `change` on: None for the schema it has (go on), else the new
    schema to record; `fill`: what the rows there before got in the added columns (core/added_fill.py), given
    the definitions the task had. Raises SchemaChangeHalted."""
    where = f"{change.table} at {change.position}"
    if change.kind is _K.HARMLESS or (change.kind is _K.TABLE_ONLY and policy == "ignore"):
        log.info("DDL on %s leaves the captured columns as they are, continuing: %s", where, change.statement)
        return None
    if change.renamed_to is not None:
        raise SchemaChangeHalted(change, policy, renamed_hint(change))
    if schema is None or change.kind is _K.TABLE_ONLY:
        raise SchemaChangeHalted(change, policy)
    captured = {c.name for c in schema.columns}
    touched = [n for n in change.columns if n in captured]
    if change.kind is _K.OTHER and (touched or not change.columns):
        raise SchemaChangeHalted(change, policy)
    new = tuple(n for n in change.added if n not in schema.excluded)
    if new and policy == "halt":
        raise SchemaChangeHalted(change, policy, "set pipeline.schema_change_policy: apply_add_columns (adds them to "
                                 "the target) or ignore (leaves them out until a re-plan) and run again, or "
                                 + REPLAN_HINT)
    adds = new if policy == "apply_add_columns" else ()
    left_out = new if policy == "ignore" else ()
    if not touched and not adds and not left_out:
        log.info("DDL on %s changes no captured column, continuing: %s", where, change.statement)
        return None
    try:
        current = describe(schema.table)
    except TableMissing:
        raise SchemaChangeHalted(change, policy, gone_hint(schema.table),
                                 f"{schema.table} no longer exists on the source under this name") from None
    now = {c.name: c for c in current.columns}
    if not captured <= set(now) or not set(adds) <= set(now):
        # a later DDL took a captured or the added column away (dropped, or renamed: its values would go nowhere)
        raise SchemaChangeHalted(change, policy)
    _check_target_holds(change, policy, sink, schema, [now[n] for n in touched])
    added = [c for c in current.columns if c.name not in captured and c.name in adds]
    if added:
        filled = fill(change, [c.name for c in added], schema)
        if filled.unknown:
            raise SchemaChangeHalted(
                change, policy, f"{REPLAN_HINT} (it reads the table's rows again), or set "
                "pipeline.schema_change_policy: ignore and run again (leaves the column out until a re-plan)",
                "the rows there before got values in the added column(s) that no log event carries and the task "
                "cannot know: " + "; ".join(f"{n}: {why}" for n, why in filled.unknown.items()))
        sink.add_columns(schema, added, filled.literals)
    log.log(logging.WARNING if left_out else logging.INFO, "DDL on %s: following it%s%s%s: %s", where,
            f", retyped {touched} (the target holds them)" if touched else "",
            f", added {[c.name for c in added]}" if added else "",
            f", leaving out the added {list(left_out)} (not captured until a re-plan)" if left_out else "",
            change.statement)
    followed = TableSchema(schema.table, tuple(now[c.name] if c.name in touched else c for c in schema.columns)
                           + tuple(added), schema.primary_key, schema.excluded + left_out)
    return replace(followed, storage=current.storage if _as_read(followed, current) else schema.storage)


def _as_read(followed: TableSchema, current: TableSchema) -> bool:
    """Are the definitions followed the catalog's now? If not, a later DDL is in the catalog already, and the
    storage now may be a rewrite's after it: the one read with the definitions before is kept (it was read before
    any change the task has not followed, so a rewrite since still shows)."""
    def shape(schema: TableSchema) -> dict[str, str]:
        return {c.name: c.native for c in schema.columns if c.name not in followed.excluded}
    return shape(followed) == shape(current)


# What the new name in source.tables does (a re-plan would look for the old name, which is gone).
_JOINS = ("it is planned and snapshotted under its new name, into a target table of that name, and joins the log "
          "phase from its own snapshot (the target table of the old name is left as it is)")


def gone_hint(table: TableId) -> str:
    """The way out of a change met after a later DDL renamed or dropped its table (the log tells which only later)."""
    return (f"a later DDL renamed or dropped {table}: if renamed, {RENAMED_TABLE_WAY_OUT} and run again ({_JOINS}); "
            "if dropped, remove it from source.tables")


def renamed_hint(change: SchemaChange) -> str:
    """The way out of a renamed table."""
    hint = (f"put {change.renamed_to} in source.tables in place of {change.table} (and in any source setting naming "
            f"it) and run again: {_JOINS}")
    if change.kind is _K.TABLE_ONLY:  # PostgreSQL: its changes keep coming, by relation, under the new name
        hint += ("; or set pipeline.schema_change_policy: ignore, which goes on applying them to the target table "
                 "of the old name")
    return hint


def _check_target_holds(change: SchemaChange, policy: str, sink: Sink, schema: TableSchema,
                        retyped: list[Column]) -> None:
    """A column the catalog does not show (a target without declared columns) takes what comes; one of a type
    fits.py does not model holds the new definition when it is of the type the sink declares for it, as before
    the change or as the user altered it."""
    capacities = sink.column_capacities(schema.table, fresh=True)  # the user may have altered it since the run began
    declared = sink.target_format().declared
    missing = []
    for column in retyped:
        cap, in_key = capacities.get(column.name), column.name in schema.primary_key
        if cap is not None and cap.family is Family.OTHER:
            wanted = declared(column, in_key)
            held = wanted in (declared(schema.column(column.name), in_key), cap.type_text)
        else:
            held = holds(cap, column)
        if not held:
            missing.append(sink.alter_column_sql(schema.table, column))
    if missing:
        raise SchemaChangeHalted(change, policy, f"make the target's columns hold the new definitions "
                                 f"({'; '.join(missing)}) and run again: the run then follows the change; or "
                                 + REPLAN_HINT)
