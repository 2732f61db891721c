"""How a table's definition in a pgoutput Relation message differs from the definition the task reads it with:
the schema recorded with the checkpoint (for the first Relation of a connection, which may follow DDL done while
no run was reading) or the Relation before it.

Both sides are compared as `format_type` text, the form the recorded schema holds (pg_attribute + format_type);
a Relation carries type OIDs and typmods, named through the source's catalog.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cdc_assets.core.events import SchemaChange, SchemaChangeKind
from cdc_assets.core.positions import Position
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


@dataclass(frozen=True)
class Drift:
    """How a table's definition changed between two shapes; falsy when nothing we read changed."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    retyped: tuple[str, ...]
    key: tuple[tuple[str, ...], tuple[str, ...]] | None  # (old, new) replica identity when it changed
    renamed_to: TableId | None

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.retyped or self.key or self.renamed_to)

    @property
    def kind(self) -> SchemaChangeKind:
        """Index or comment changes show no drift at all (a Relation after them names the same columns and
        types), so no drift is HARMLESS. A rename shows as a column removed and one added: OTHER."""
        if self.removed or self.key:
            return SchemaChangeKind.OTHER
        if self.renamed_to:
            return SchemaChangeKind.TABLE_ONLY if not (self.added or self.retyped) else SchemaChangeKind.OTHER
        return SchemaChangeKind.RETYPED if self.retyped else SchemaChangeKind.ADDED_COLUMNS

    def describe(self) -> str:
        columns = [f"{what} [{', '.join(names)}]" for what, names in (
            ("added", self.added), ("removed", self.removed), ("retyped", self.retyped)) if names]
        parts = [f"columns changed: {'; '.join(columns)}"] if columns else []
        if self.key:
            parts.append(f"replica identity changed: [{', '.join(self.key[0])}] -> [{', '.join(self.key[1])}]")
        if self.renamed_to:
            parts.append(f"renamed to {self.renamed_to}")
        return "; ".join(parts)

    def schema_change(self, table: TableId, position: Position) -> SchemaChange:
        # A changed replica identity or name is the table's own change: no columns named, nothing to narrow it.
        columns = () if self.key or self.renamed_to else self.retyped + self.removed
        return SchemaChange(table, self.describe(), position, self.kind, self.added, columns, self.renamed_to)


def drift(old: Shape, new: Shape) -> Drift:
    before, after = old.columns, new.columns
    rekeyed = old.key is not None and new.key is not None and old.key != new.key
    return Drift(added=tuple(n for n in after if n not in before),
                 removed=tuple(n for n in before if n not in after),
                 retyped=tuple(n for n in after if n in before and after[n] != before[n]),
                 key=(old.key, new.key) if rekeyed else None,
                 renamed_to=new.table if old.table != new.table else None)
