"""DDL in the binlog: which captured tables a statement (a QUERY_EVENT) creates, alters, renames, truncates or
drops, and what kind of schema change it is for them."""
from __future__ import annotations

import re
from collections.abc import Collection

from cdc_assets.core.events import SchemaChangeKind
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
_CREATE = re.compile(r"CREATE\s+TABLE\b", re.I)  # not OR REPLACE (a drop and a create), not TEMPORARY
LEADING_COMMENTS = re.compile(r"^(?:\s+|/\*.*?\*/)+", re.S)
ALTER = re.compile(r"^\s*ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?\S+\s+(?P<clauses>.*)$",
                    re.I | re.S)
# Clauses that leave every row image as it was (MySQL 8.4 / MariaDB 10.11 ALTER TABLE syntax): indexes, constraints
# (they refuse rows, never change one), comments, table options, a column's default or visibility, how the server
# carries the ALTER out.
_CONSTRAINT = rf"(?:CONSTRAINT\s+(?:{_IDENT}\s+)?)?(?:FOREIGN\s+KEY|CHECK|UNIQUE)\b"
_HARMLESS_CLAUSE = re.compile(
    rf"^(?:ADD|DROP)\s+(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?(?:INDEX|KEY)\b|^ADD\s+{_CONSTRAINT}"
    r"|^DROP\s+(?:FOREIGN\s+KEY|CONSTRAINT|CHECK)\b|^(?:RENAME|ALTER)\s+(?:INDEX|KEY)\b"
    rf"|^ALTER\s+(?:COLUMN\s+)?{_IDENT}\s+(?:SET\s+DEFAULT|DROP\s+DEFAULT|SET\s+(?:VISIBLE|INVISIBLE)|DEFAULT)\b"
    r"|^(?:COMMENT|ENGINE|ALGORITHM|LOCK|AUTO_INCREMENT|ROW_FORMAT|KEY_BLOCK_SIZE|STATS_\w+|FORCE|ORDER\s+BY"
    r"|(?:DEFAULT\s+)?(?:CHARACTER\s+SET|CHARSET|COLLATE)(?!.*\bCONVERT\b))\b", re.I | re.S)
# How the server carries out the ALTER (ALGORITHM=INSTANT, LOCK=NONE), not what it changes.
_EXECUTION_OPTION = re.compile(r"^(?:ALGORITHM|LOCK)\b", re.I)
# ADD [COLUMN] [IF NOT EXISTS] then a column name or a parenthesised list of column definitions; ADD followed by
# one of these words adds something else.
_NOT_A_COLUMN = r"(?!(?:INDEX|KEY|UNIQUE|PRIMARY|CONSTRAINT|FOREIGN|FULLTEXT|SPATIAL|CHECK|PARTITION|PERIOD)\b)"
ADD_COLUMN = re.compile(rf"^ADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?{_NOT_A_COLUMN}(?P<rest>.*)$", re.I | re.S)
COLUMN_NAME = re.compile(rf"\s*{_NOT_A_COLUMN}({_IDENT})", re.I)
# Clauses on one existing column: MODIFY c <definition>; CHANGE old new <definition> (a rename unless old = new);
# RENAME COLUMN old TO new; DROP [COLUMN] c.
_MODIFY = re.compile(rf"^MODIFY\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?({_IDENT})\s", re.I)
_CHANGE = re.compile(rf"^CHANGE\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?({_IDENT})\s+({_IDENT})\s", re.I)
_RENAME_COLUMN = re.compile(rf"^RENAME\s+COLUMN\s+(?:IF\s+EXISTS\s+)?({_IDENT})\s+TO\s+{_IDENT}\s*$", re.I)
_DROP_COLUMN = re.compile(
    rf"^DROP\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?{_NOT_A_COLUMN}({_IDENT})\s*(?:CASCADE|RESTRICT)?\s*$", re.I)


def unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def _named_tables(names: str, default_db: str) -> list[TableId]:
    found = []
    for m in _NAME_PARTS.finditer(names):
        if m.group(2) is None and m.group(1).upper() == "TO":
            continue  # RENAME's keyword; a table really named `to` must be quoted
        db, table = (m.group(1), m.group(2)) if m.group(2) else (default_db, m.group(1))
        found.append(TableId(unquote(db), unquote(table)))
    return found


def ddl_tables(statement: str, default_db: str, captured: Collection[TableId]) -> list[TableId]:
    """The captured tables a DDL statement creates, alters, renames, truncates or drops, in statement order.

    Unqualified names belong to `default_db` (the QUERY_EVENT's current database). Temporary tables,
    indexes and other objects are not tables we capture."""
    text = LEADING_COMMENTS.sub("", statement)
    if m := _DROP_DATABASE.match(text):
        db = unquote(m.group("db"))
        return sorted(t for t in captured if t.namespace == db)
    for pattern in _TABLE_DDL:
        if m := pattern.match(text):
            return [t for t in dict.fromkeys(_named_tables(m.group("names"), default_db)) if t in captured]
    return []


_RENAME_TABLES = re.compile(r"^RENAME\s+TABLES?\s+(?P<names>.+)$", re.I | re.S)
# ALTER TABLE's own rename clause: RENAME [TO | AS] new (not RENAME COLUMN, INDEX or KEY)
_RENAME_CLAUSE = re.compile(rf"^RENAME\s+(?:(?:TO|AS)\s+)?(?!(?:COLUMN|INDEX|KEY)\b)(?P<name>{_NAME})\s*$", re.I)


def renamed_tables(statement: str, default_db: str) -> dict[TableId, TableId]:
    """The tables a RENAME TABLE, or an ALTER TABLE's RENAME clause, gives another name: old -> the name it ends
    with (`RENAME TABLE a TO tmp, b TO a, tmp TO b` swaps a and b)."""
    text = LEADING_COMMENTS.sub("", statement).strip()
    if m := _RENAME_TABLES.match(text):
        names = _named_tables(m.group("names"), default_db)
        pairs = list(zip(names[::2], names[1::2]))
    elif (m := ALTER.match(text)) and (named := _TABLE_DDL[0].match(text)):
        table = _named_tables(named.group("names"), default_db)
        pairs = [(table[0], _named_tables(c.group("name"), default_db)[0])
                 for clause in split_top_level(m.group("clauses")) if (c := _RENAME_CLAUSE.match(clause))]
    else:
        return {}
    ends: dict[TableId, TableId] = {}
    for old, new in pairs:
        moved = [k for k, now in ends.items() if now == old]
        for k in moved or [old]:
            ends[k] = new
    return {old: new for old, new in ends.items() if old != new}


def split_top_level(text: str) -> list[str]:
    """Comma-separated parts of `text`; commas inside parentheses or quotes ('', "", ``) do not split."""
    parts, depth, quote, current = [], 0, "", ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote  # a doubled quote closes and reopens: same split
        elif ch in "'\"`":
            quote = ch
        else:
            depth += ch == "("
            depth -= ch == ")"
        if ch == "," and depth == 0 and not quote:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    return parts + [current.strip()]


def _added_names(rest: str) -> list[str] | None:
    """The column names an ADD clause's remainder declares: `c INT ...` or `(c INT, d INT)`."""
    rest = rest.strip()
    if rest.startswith("(") and rest.endswith(")"):
        definitions = split_top_level(rest[1:-1])
    else:
        definitions = [rest]
    names = [m.group(1) for d in definitions if (m := COLUMN_NAME.match(d))]
    return [unquote(n) for n in names] if len(names) == len(definitions) else None


def classify(statement: str) -> tuple[SchemaChangeKind, tuple[str, ...], tuple[str, ...]]:
    """(kind, added column names, existing column names changed) of a DDL statement for the tables it names.

    An ALTER TABLE is read clause by clause: every clause harmless (`_HARMLESS_CLAUSE`) is HARMLESS; otherwise
    added columns only is ADDED_COLUMNS; columns retyped (MODIFY, CHANGE under the same name), maybe with added
    ones, is RETYPED; a column dropped or renamed among them is OTHER naming the columns; a clause on the table
    itself (its key, partitions, a rename, CONVERT TO CHARACTER SET) or one not understood is OTHER naming none.
    A CREATE TABLE (not OR REPLACE) of a captured table is TABLE_ONLY: the table exists, so it created nothing.
    Every other statement is OTHER."""
    text = LEADING_COMMENTS.sub("", statement)
    if _CREATE.match(text):
        return SchemaChangeKind.TABLE_ONLY, (), ()
    m = ALTER.match(text)
    if not m:
        return SchemaChangeKind.OTHER, (), ()
    added: list[str] = []
    retyped: list[str] = []
    gone: list[str] = []
    for clause in split_top_level(m.group("clauses")):
        if _HARMLESS_CLAUSE.match(clause):
            continue
        if add := ADD_COLUMN.match(clause):
            names = _added_names(add.group("rest"))
            if not names:
                return SchemaChangeKind.OTHER, (), ()
            added += names
        elif found := _MODIFY.match(clause + " "):
            retyped.append(unquote(found.group(1)))
        elif found := _CHANGE.match(clause + " "):
            old, new = unquote(found.group(1)), unquote(found.group(2))
            (retyped if old.lower() == new.lower() else gone).append(old)
        elif found := _RENAME_COLUMN.match(clause) or _DROP_COLUMN.match(clause):
            gone.append(unquote(found.group(1)))
        else:
            return SchemaChangeKind.OTHER, (), ()
    if gone:
        return SchemaChangeKind.OTHER, tuple(added), tuple(retyped + gone)
    if retyped:
        return SchemaChangeKind.RETYPED, tuple(added), tuple(retyped)
    return (SchemaChangeKind.ADDED_COLUMNS if added else SchemaChangeKind.HARMLESS), tuple(added), ()
