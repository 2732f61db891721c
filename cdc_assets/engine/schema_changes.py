"""DDL met in the log on a captured table, as its source classified it (SchemaChangeKind): following added
columns, and halting."""
from __future__ import annotations

from typing import Callable

from cdc_assets.core.events import SchemaChange, SchemaChangeKind
from cdc_assets.core.tables import Column, TableId, TableSchema
from cdc_assets.errors import REPLAN_HINT, CdcError


class SchemaChangeHalted(CdcError):
    """DDL on a captured table met in the log that `pipeline.schema_change_policy` does not follow, with the
    statement and its position. Way out: apply the change to the target and let one run pass it with
    `schema_change_policy: ignore`, or re-plan (docs/concepts/log-phase.md, "Schema changes")."""

    def __init__(self, change: SchemaChange, policy: str) -> None:
        super().__init__(
            f"DDL on captured table {change.table} at {change.position} stops the incremental phase "
            f"(schema_change_policy {policy}): {change.statement}",
            "apply the same change to the target table and set pipeline.schema_change_policy: ignore for one run, "
            f"or {REPLAN_HINT}")
        self.change = change


def added_columns(change: SchemaChange, known: TableSchema | None, describe: Callable[[TableId], TableSchema],
                  policy: str) -> list[Column]:
    """With apply_add_columns and a change that only adds columns: the columns the source table now has beyond
    the known ones (described now: a later DDL may already show). Empty when the change must halt."""
    if policy != "apply_add_columns" or known is None or change.kind is not SchemaChangeKind.ADDED_COLUMNS:
        return []
    current = describe(known.table)
    names = {c.name for c in known.columns}
    if not names <= {c.name for c in current.columns}:
        return []
    return [c for c in current.columns if c.name not in names]
