"""How a table's definition in a pgoutput Relation message differs from the definition the task reads it with:
the schema recorded with the checkpoint (for the first Relation of a connection, which may follow DDL done while
no run was reading) or the Relation before it.

Both sides are compared as `format_type` text, the form the recorded schema holds (pg_attribute + format_type);
a Relation carries type OIDs and typmods, named through the source's catalog.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.sources.postgres import pgoutput

TypeName = Callable[[int, int], str]  # (type OID, atttypmod) -> format_type text


@dataclass(frozen=True)
class Shape:
    table: TableId  # the name the table goes by
    columns: dict[str, str]  # name -> format_type text; generated columns are in neither side (pgoutput <= PG 17)
    key: tuple[str, ...] | None  # replica identity columns; None when unknown (a recorded schema)


def recorded_shape(schema: TableSchema) -> Shape:
    return Shape(schema.table, {c.name: c.native for c in schema.columns}, None)


def relation_shape(message: pgoutput.Relation, type_name: TypeName, excluded: tuple[str, ...] = ()) -> Shape:
    """`excluded`: columns the task leaves out (source.exclude_columns), whose changes are no drift."""
    return Shape(TableId(message.namespace, message.name),
                 {c.name: type_name(c.type_oid, c.atttypmod) for c in message.columns if c.name not in excluded},
                 tuple(c.name for c in message.columns if c.is_key))


def describe_drift(old: Shape, new: Shape) -> str:
    """A human description of how the definition changed; '' when nothing we read changed. A statement that only
    adds columns reads 'columns changed: added [...]' (what apply_add_columns recognises)."""
    before, after = old.columns, new.columns
    columns = [f"{what} [{', '.join(names)}]" for what, names in (
        ("added", [n for n in after if n not in before]),
        ("removed", [n for n in before if n not in after]),
        ("retyped", [n for n in after if n in before and after[n] != before[n]]),
    ) if names]
    parts = [f"columns changed: {'; '.join(columns)}"] if columns else []
    if old.key is not None and new.key is not None and old.key != new.key:
        parts.append(f"replica identity changed: [{', '.join(old.key)}] -> [{', '.join(new.key)}]")
    if old.table != new.table:
        parts.append(f"renamed to {new.table}")
    return "; ".join(parts)
