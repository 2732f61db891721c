"""DDL in the binlog: which captured tables a statement (a QUERY_EVENT) creates, alters, renames, truncates or
drops."""
from __future__ import annotations

import re
from collections.abc import Collection

from cdc_assets.core.tables import TableId

_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_NAME = rf"{_IDENT}(?:\s*\.\s*{_IDENT})?"
_NAME_PARTS = re.compile(rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?")
_NAME_LIST = rf"{_NAME}(?:\s*,\s*{_NAME})*"
_TABLE_DDL = [re.compile(p, re.I | re.S) for p in (
    rf"ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?(?P<names>{_NAME})",
    rf"CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<names>{_NAME})",
    rf"DROP\s+TABLES?\s+(?:IF\s+EXISTS\s+)?(?P<names>{_NAME_LIST})",
    rf"TRUNCATE\s+(?:TABLE\s+)?(?P<names>{_NAME})",
    rf"RENAME\s+TABLES?\s+(?P<names>{_NAME}\s+TO\s+{_NAME}(?:\s*,\s*{_NAME}\s+TO\s+{_NAME})*)",
)]
_DROP_DATABASE = re.compile(rf"DROP\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+EXISTS\s+)?(?P<db>{_IDENT})", re.I)
_LEADING_COMMENTS = re.compile(r"^(?:\s+|/\*.*?\*/)+", re.S)


def _unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def _named_tables(names: str, default_db: str) -> list[TableId]:
    found = []
    for m in _NAME_PARTS.finditer(names):
        if m.group(2) is None and m.group(1).upper() == "TO":
            continue  # RENAME's keyword; a table really named `to` must be quoted
        db, table = (m.group(1), m.group(2)) if m.group(2) else (default_db, m.group(1))
        found.append(TableId(_unquote(db), _unquote(table)))
    return found


def ddl_tables(statement: str, default_db: str, captured: Collection[TableId]) -> list[TableId]:
    """The captured tables a DDL statement creates, alters, renames, truncates or drops, in statement order.

    Unqualified names belong to `default_db` (the QUERY_EVENT's current database). Temporary tables,
    indexes and other objects are not tables we capture."""
    text = _LEADING_COMMENTS.sub("", statement)
    if m := _DROP_DATABASE.match(text):
        db = _unquote(m.group("db"))
        return sorted(t for t in captured if t.namespace == db)
    for pattern in _TABLE_DDL:
        if m := pattern.match(text):
            return [t for t in dict.fromkeys(_named_tables(m.group("names"), default_db)) if t in captured]
    return []
