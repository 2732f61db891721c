"""DDL met in the log on a captured table: what is harmless, what can be followed (ADD COLUMN), what halts."""
from __future__ import annotations

import re
from typing import Callable

from cdc_assets.core.events import SchemaChange
from cdc_assets.core.tables import Column, TableId, TableSchema
from cdc_assets.errors import REPLAN_HINT, CdcError

_ALTER = re.compile(r"^\s*ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?\S+\s+(?P<clauses>.*)$",
                    re.I | re.S)
_INDEX_CLAUSE = re.compile(r"^(?:ADD|DROP)\s+(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?(?:INDEX|KEY)\b"
                           r"|^(?:COMMENT|ENGINE|ALGORITHM|LOCK)\b", re.I)
_ADD_COLUMN = re.compile(r"^ADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?(?!INDEX\b|KEY\b|UNIQUE\b|PRIMARY\b|"
                         r"CONSTRAINT\b|FOREIGN\b|FULLTEXT\b|SPATIAL\b|CHECK\b|PARTITION\b)", re.I)
_PG_ADDED = re.compile(r"^columns changed: added \[[^\]]*\]$")


class SchemaChangeHalted(CdcError):
    def __init__(self, change: SchemaChange, policy: str) -> None:
        super().__init__(
            f"DDL on captured table {change.table} at {change.position} stops the incremental phase "
            f"(schema_change_policy {policy}): {change.statement}",
            "apply the same change to the target table and set pipeline.schema_change_policy: ignore for one run, "
            f"or {REPLAN_HINT}")
        self.change = change


def _clauses(statement: str) -> list[str] | None:
    """The top-level comma-separated clauses of an ALTER TABLE (commas inside parentheses do not split)."""
    m = _ALTER.match(statement)
    if not m:
        return None
    clauses, depth, current = [], 0, ""
    for ch in m.group("clauses"):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            clauses.append(current.strip())
            current = ""
        else:
            current += ch
    return clauses + [current.strip()]


def harmless(statement: str) -> bool:
    """Index, comment and engine changes leave every row image as it was."""
    clauses = _clauses(statement)
    return bool(clauses) and all(_INDEX_CLAUSE.match(c) for c in clauses)


def adds_columns_only(statement: str) -> bool:
    if _PG_ADDED.match(statement):
        return True
    clauses = _clauses(statement)
    return bool(clauses) and all(_ADD_COLUMN.match(c) for c in clauses)


def added_columns(change: SchemaChange, known: TableSchema | None, describe: Callable[[TableId], TableSchema],
                  policy: str) -> list[Column]:
    """With apply_add_columns and a statement that only adds columns: the columns the source table now has beyond
    the known ones (described now: a later DDL may already show). Empty when the change must halt."""
    if policy != "apply_add_columns" or known is None or not adds_columns_only(change.statement):
        return []
    current = describe(known.table)
    names = {c.name for c in known.columns}
    if not names <= {c.name for c in current.columns}:
        return []
    return [c for c in current.columns if c.name not in names]
