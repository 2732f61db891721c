"""What MySQL gave the rows there before an ADD COLUMN, read from the statement in the binlog (core/added_fill.py):
the ADD's own DEFAULT, or the implicit default of a NOT NULL column without one. The catalog is no witness: by the
time the log phase meets the ADD, a later statement may have changed the column's default."""
from __future__ import annotations

import re

from cdc_assets.core.added_fill import AddedFill
from cdc_assets.sources.mysql.ddl import ADD_COLUMN, ALTER, COLUMN_NAME, LEADING_COMMENTS, split_top_level, unquote

_QUOTED = re.compile(r"'(?:[^'\\]|''|\\.)*'|\"(?:[^\"\\]|\"\"|\\.)*\"", re.S)
_STRING = re.compile(r"'((?:[^'\\]|'')*)'(?!')")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?![\w.])")
_DEFAULT = re.compile(r"\bDEFAULT\b\s*", re.I)
_COMPUTED = re.compile(r"\b(?:AUTO_INCREMENT|GENERATED|SERIAL)\b|\bAS\s*\(", re.I)
_NOT_NULL = re.compile(r"\bNOT\s+NULL\b", re.I)
_NULL = re.compile(r"\bNULL\b", re.I)
_ZERO = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "dec", "numeric", "fixed",
         "float", "double", "real", "bool", "boolean"}
_EMPTY = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "nchar", "nvarchar"}


def added_fill(statement: str, names: list[str], explicit_timestamps: bool = True) -> AddedFill:
    """What the rows there before `statement` (an ALTER TABLE) got in each of the added columns `names`.
    `explicit_timestamps`: the server's explicit_defaults_for_timestamp; off, a TIMESTAMP without NULL or a
    default is NOT NULL with CURRENT_TIMESTAMP or a zero date as its default."""
    definitions = _definitions(statement)
    fill = AddedFill()
    for name in names:
        body = definitions.get(name.lower())
        if body is None:
            fill.unknown[name] = "its definition in the statement was not understood"
            continue
        value, why = _value(body, explicit_timestamps)
        if why:
            fill.unknown[name] = why
        elif value is not None:
            fill.literals[name] = value
    return fill


def _definitions(statement: str) -> dict[str, str]:
    """Each added column's definition after its name, by lower-cased name."""
    m = ALTER.match(LEADING_COMMENTS.sub("", statement))
    found: dict[str, str] = {}
    if not m:
        return found
    for clause in split_top_level(m.group("clauses")):
        add = ADD_COLUMN.match(clause)
        if not add:
            continue
        rest = add.group("rest").strip()
        parts = split_top_level(rest[1:-1]) if rest.startswith("(") and rest.endswith(")") else [rest]
        for part in parts:
            if named := COLUMN_NAME.match(part):
                found[unquote(named.group(1)).lower()] = part[named.end():]
    return found


def _value(body: str, explicit_timestamps: bool) -> tuple[str | None, str]:
    """(the SQL constant, or None for NULL; why it cannot be known, or "")."""
    masked = _QUOTED.sub(lambda q: "'" + " " * (len(q.group()) - 2) + "'", body)  # no keyword inside a string
    if _COMPUTED.search(masked):
        return None, "the source computes its values row by row (AUTO_INCREMENT, SERIAL or a generated column)"
    default = _DEFAULT.search(masked)
    kind = (body.split() or [""])[0].split("(")[0].lower()
    if default is None:
        if kind == "timestamp" and not explicit_timestamps and not _NULL.search(_NOT_NULL.sub("", masked)):
            return None, "explicit_defaults_for_timestamp is off: MySQL gave the rows CURRENT_TIMESTAMP or a zero date"
        if not _NOT_NULL.search(masked):
            return None, ""
        if kind in _ZERO:
            return "0", ""
        if kind in _EMPTY:
            return "''", ""
        return None, f"MySQL gave the rows its implicit default for a NOT NULL {kind} column"
    rest = body[default.end():]
    if string := _STRING.match(rest):
        return "'" + string.group(1) + "'", ""  # no backslash in it: read alike by both engines
    if number := _NUMBER.match(rest):
        return number.group().lstrip("+"), ""
    word = (rest.split() or [""])[0].rstrip(",").upper()
    if word == "NULL":
        return None, ""
    if word in ("TRUE", "FALSE"):
        return ("'1'" if word == "TRUE" else "'0'"), ""
    return None, (f"its default {rest.strip()[:60]} is not a constant every target reads alike (an expression the "
                  "source evaluated, or a string with a backslash escape)")
