"""Row changes logged as SQL statements: which captured tables a DML statement in a QUERY_EVENT changes.

Under binlog_format=STATEMENT (or MIXED, for statements it deems safe) the server logs an INSERT, UPDATE,
DELETE, REPLACE or LOAD DATA as its text instead of row events. The format can be switched globally after the
plan, or by one session (SET SESSION binlog_format), so no check at plan or sync start rules it out. The reader
cannot apply a statement: its changes would be skipped while the checkpoint moves past them. Finding one on a
captured table is therefore a stop (see `logged_as_statement`).

Only the tables a statement writes count: INSERT ... SELECT from a captured table into another one does not.
A multi-table UPDATE counts the tables its SET assigns (all of its tables when a column is unqualified).
Unqualified names belong to the event's default database; names compare case-insensitively (on a server with
lower_case_table_names=1 a statement may spell a table in another case: a false stop beats a silent loss).
"""
from __future__ import annotations

import re
from collections.abc import Collection

from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.tables import TableId
from cdc_assets.errors import SourceSetupError
from cdc_assets.sources.mysql.boundaries import Boundaries

_TOKEN = re.compile(r"""
    (?P<skip>\s+|/\*M?!\d*|\*/|/\*.*?\*/|(?:--\s|\#)[^\n]*)   # space, comments; /*!...*/ bodies are executed
  | (?P<quoted>`(?:[^`]|``)*`)
  | (?P<dquoted>"(?:[^"\\]|\\.|"")*")                        # a string, or an identifier under ANSI_QUOTES
  | (?P<string>'(?:[^'\\]|\\.|'')*')
  | (?P<word>[\w$]+)
  | (?P<punct>.)
""", re.S | re.X)

_INSERT_OPTIONS = {"LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "INTO"}
_UPDATE_OPTIONS = {"LOW_PRIORITY", "IGNORE"}
_DELETE_OPTIONS = {"LOW_PRIORITY", "QUICK", "IGNORE"}
_JOIN_WORDS = {"JOIN", "STRAIGHT_JOIN"}
_JOIN_MODIFIERS = {"INNER", "CROSS", "LEFT", "RIGHT", "OUTER", "NATURAL", "FULL"}
_NOT_ALIAS = _JOIN_WORDS | _JOIN_MODIFIERS | {"ON", "USING", "SET", "WHERE", "PARTITION", "USE", "FORCE", "IGNORE",
                                              "ORDER", "LIMIT", "FROM", "RETURNING", "FOR", "WINDOW"}
_END_OF_TABLES = {"WHERE", "ORDER", "LIMIT", "RETURNING"}

Token = tuple[str, str]  # (kind, text): kind "quoted", "dquoted", "string", "word" or "punct"
_NAME_KINDS = ("word", "quoted", "dquoted")
Name = tuple[str, ...]  # (table,) or (database, table), unquoted


def _tokens(statement: str) -> list[Token]:
    return [(m.lastgroup, m.group()) for m in _TOKEN.finditer(statement) if m.lastgroup != "skip"]


def _unquote(text: str) -> str:
    return text[1:-1].replace(text[0] * 2, text[0]) if text[:1] in ("`", '"') else text


class _Reader:
    """A cursor over a statement's tokens."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens, self.i = tokens, 0

    def word(self, offset: int = 0) -> str:
        """The upper-cased bare word at the cursor (+offset), or "" for anything else."""
        j = self.i + offset
        return self.tokens[j][1].upper() if j < len(self.tokens) and self.tokens[j][0] == "word" else ""

    def punct(self) -> str:
        return self.tokens[self.i][1] if self.i < len(self.tokens) and self.tokens[self.i][0] == "punct" else ""

    def done(self) -> bool:
        return self.i >= len(self.tokens)

    def skip_words(self, words: set[str]) -> None:
        while self.word() in words:
            self.i += 1

    def skip_group(self) -> None:
        """Past the balanced parentheses opening at the cursor."""
        depth = 0
        while not self.done():
            depth += {"(": 1, ")": -1}.get(self.punct(), 0)
            self.i += 1
            if depth == 0:
                return

    def name(self) -> Name | None:
        """An identifier, or two joined by a dot, at the cursor."""
        if self.done() or self.tokens[self.i][0] not in _NAME_KINDS:
            return None
        parts = [_unquote(self.tokens[self.i][1])]
        self.i += 1
        while self.punct() == "." and self.i + 1 < len(self.tokens) and self.tokens[self.i + 1][0] in _NAME_KINDS:
            parts.append(_unquote(self.tokens[self.i + 1][1]))
            self.i += 2
        if self.punct() == "." and self.i + 1 < len(self.tokens) and self.tokens[self.i + 1][1] == "*":
            self.i += 2  # DELETE t.* FROM ...
        return tuple(parts)

    def names(self, stops: set[str]) -> list[Name]:
        """A comma-separated list of names, up to a word of `stops`."""
        found = []
        while not self.done() and self.word() not in stops:
            if (n := self.name()) is not None:
                found.append(n)
            else:
                self.i += 1
        return found

    def references(self, stops: set[str]) -> dict[Name, Name]:
        """Table references (FROM/UPDATE syntax, joins included) up to a word of `stops` outside parentheses:
        {alias or name: table name}."""
        tables: dict[Name, Name] = {}
        expect_table = True
        while not self.done() and self.word() not in stops:
            word, punct = self.word(), self.punct()
            if punct == "(":
                if expect_table and self.word(1) not in ("SELECT", "WITH", "VALUES", "TABLE"):
                    self.i += 1  # a parenthesised join: its tables follow
                else:
                    self.skip_group()  # a derived table, an index hint's list, a partition list
                    expect_table = False
            elif punct == "," or word in _JOIN_WORDS:
                self.i, expect_table = self.i + 1, True
            elif word in ("ON", "USING"):
                self._skip_condition(stops)
            elif expect_table and (table := self.name()) is not None:
                tables[table] = table
                if self.word() == "AS":
                    self.i += 1
                if self.word() not in _NOT_ALIAS and (alias := self.name()) is not None:
                    tables[alias] = table
                expect_table = False
            else:
                self.i += 1
        return tables

    def _skip_condition(self, stops: set[str]) -> None:
        self.i += 1
        while not self.done() and self.word() not in stops | _JOIN_WORDS | _JOIN_MODIFIERS and self.punct() != ",":
            if self.punct() == "(":
                self.skip_group()
            else:
                self.i += 1

    def assigned(self) -> list[Name] | None:
        """The tables an UPDATE's SET assigns columns of (the cursor past SET); None when a column is unqualified."""
        found: list[Name] = []
        while not self.done() and self.word() not in _END_OF_TABLES:
            column = self.name()
            if column is None:
                return None
            if len(column) == 1:
                return None
            found.append(column[:-1])
            while not self.done() and self.word() not in _END_OF_TABLES and self.punct() != ",":
                if self.punct() == "(":
                    self.skip_group()
                else:
                    self.i += 1
            if self.punct() == ",":
                self.i += 1
        return found


def written_tables(statement: str) -> list[Name]:
    """The tables a DML statement writes, as written (one or two parts); [] for any other statement."""
    r = _Reader(_tokens(statement))
    if r.word() == "WITH":  # a common table expression before UPDATE/DELETE (MySQL 8)
        while not r.done() and r.word() not in ("UPDATE", "DELETE", "INSERT", "REPLACE"):
            if r.punct() == "(":
                r.skip_group()
            else:
                r.i += 1
    verb = r.word()
    r.i += 1
    if verb in ("INSERT", "REPLACE"):
        r.skip_words(_INSERT_OPTIONS)
        return [n] if (n := r.name()) is not None else []
    if verb == "LOAD" and r.word() in ("DATA", "XML"):
        while not r.done() and not (r.word() == "INTO" and r.word(1) == "TABLE"):
            r.i += 1
        r.i += 2
        return [n] if (n := r.name()) is not None else []
    if verb == "UPDATE":
        r.skip_words(_UPDATE_OPTIONS)
        tables = r.references({"SET"})
        r.i += 1
        assigned = r.assigned() if len(set(tables.values())) > 1 else None
        return [_resolve(tables, n) for n in assigned] if assigned is not None else list(dict.fromkeys(tables.values()))
    if verb == "DELETE":
        r.skip_words(_DELETE_OPTIONS)
        if r.word() == "FROM":
            r.i += 1
            listed = r.names({"USING"} | _END_OF_TABLES | {"PARTITION", "AS"})
            if r.word() != "USING":
                return listed[:1]
            r.i += 1
        else:
            listed = r.names({"FROM"})
            r.i += 1
        tables = r.references(_END_OF_TABLES)
        return [_resolve(tables, n) for n in listed]
    return []


def _resolve(tables: dict[Name, Name], name: Name) -> Name:
    """The table an alias or a name refers to: `t` may stand for `db.t` named in the references."""
    if name in tables:
        return tables[name]
    return next((t for t in tables.values() if len(name) == 1 and t[-1] == name[0]), name)


def dml_tables(statement: str, default_db: str, captured: Collection[TableId]) -> list[TableId]:
    """The captured tables a DML statement writes, in statement order; unqualified names in `default_db`."""
    by_folded = {(t.namespace.lower(), t.name.lower()): t for t in captured}
    found = []
    for name in written_tables(statement):
        db, table = (default_db, name[0]) if len(name) == 1 else name[-2:]
        if (t := by_folded.get((db.lower(), table.lower()))) is not None and t not in found:
            found.append(t)
    return found


def logged_as_statement(tables: list[TableId], verb: str, position: MysqlPosition, where: str) -> SourceSetupError:
    """The stop for a statement on captured tables. The statement's text is not shown: it may hold row values."""
    names = ", ".join(map(str, tables))
    return SourceSetupError(
        f"{names}: {'an' if verb[0] in 'AEIOU' else 'a'} {verb} at {position} in the binlog of {where} was logged as an SQL statement "
        "(binlog_format STATEMENT or MIXED, set globally or by the writing session), not as rows: its changes "
        "cannot be applied, and the sync stopped before them",
        f"set binlog_format=ROW on the source (SET GLOBAL binlog_format=ROW and in the server config; sessions "
        f"must not SET SESSION binlog_format), then re-snapshot {names}, whose changes are missing from the log: "
        "remove it from source.tables, run `cdc-assets sync` once, add it back and run `cdc-assets snapshot`; or "
        "re-snapshot the task: cdc-assets plan --replan, then cdc-assets snapshot")


class StatementStop:
    """Raises at a DML statement on a captured table before its group ends, so no checkpoint passes it;
    `stops=False` for reads of the log before the task's start, whose statements were the reader's to stop at."""

    def __init__(self, schemas: Collection[TableId], where: str, at: Boundaries, stops: bool = True) -> None:
        self.schemas, self.where, self.at, self.stops = schemas, where, at, stops

    def check(self, statement: str, default_db: str, log_pos: int) -> None:
        """`statement`, logged at `log_pos` with `default_db` as its default database."""
        if self.stops and (written := dml_tables(statement, default_db, self.schemas)):
            raise logged_as_statement(written, statement_verb(statement), self.at.within(log_pos), self.where)


def statement_verb(statement: str) -> str:
    """The DML keyword of a statement, for messages: "UPDATE", "LOAD DATA", ..."""
    words = [text.upper() for kind, text in _tokens(statement) if kind == "word"][:8]
    verb = next((w for w in words if w in ("INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD")), "statement")
    return "LOAD DATA" if verb == "LOAD" else verb
