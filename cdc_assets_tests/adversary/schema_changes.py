"""Schema changes the application makes on the source between its log-phase transactions, drawn from a menu by a
stream of the seed of their own, and only when asked (`--schema-changes`), so that every seed keeps the scenario
it drew without them. With them comes the `pipeline.schema_change_policy` the task runs under.

What the task does about each is docs/concepts/log-phase.md "Schema changes": an added column is followed under
`apply_add_columns`, left out under `ignore` (until a re-plan), stops under `halt` (way out: another policy); a
widened or int-to-bigint column is followed once the target's column holds it (way out: the ALTER the error
names, on the target); a dropped or renamed column stops under every policy (way out: `plan --replan`). The
runner applies the way out the error names (ways_out.py); the oracle compares the source's current columns, less
those the docs say the target does not get. A table the application creates (`add_table`, under any policy) is
written from then on, and added to `source.tables` at the next quiet point, as an operator adds a table to a
running task (docs/operations: a table joins from its own snapshot); the oracle compares it from then on. A
table renamed (`rename_table`, one or two at once; on PostgreSQL, plain tables) stops the sync under `halt` and
`apply_add_columns`, and under any policy on MySQL (way out: the new name in `source.tables` in place of the old
one, and its snapshot); the oracle compares it under the new name. PostgreSQL's log carries a rename only in the
Relation message before the table's next row change, so the rename's transaction changes one row of it (to
itself): a rename no row change follows leaves the target table under the old name, which the oracle does not
model. Under `ignore` a PostgreSQL rename goes on into the target table of the old name, which the oracle compares
until a command that reads the table by its name (a plan, a verification) stops and its way out puts the new name
in `source.tables` (WaysOut.target_tables).

To add a change to the menu: a function `(rng, table, engine) -> Change | None` appended to MENU, and the
`Change.after` and `Change.statement` cases for its kind."""
from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass, replace

from cdc_assets_tests.adversary.kinds import BY_NAME, MYSQL, POSTGRES, Kind, literal
from cdc_assets_tests.adversary.schema import Table, q

POLICIES = ("halt", "apply_add_columns", "ignore")
DEFAULTS = {"int": "7", "varchar": "'d'"}  # the kinds an added column is of, with its DEFAULT
LATER_DEFAULTS = {"int": "9", "varchar": "'e'"}  # set_default's: the rows there at the ADD keep the ADD's

# A varchar widened to 100 characters: written with values past the old 40 afterwards. In BY_NAME only, so that
# no table draws it (kinds.py KINDS).
BY_NAME["varchar100"] = Kind(
    "varchar100", {MYSQL: "VARCHAR(100) CHARACTER SET utf8mb4", POSTGRES: "VARCHAR(100)"},
    {e: (literal(e, "w" * 100), literal(e, "🚀" * 60)) for e in (MYSQL, POSTGRES)},
    lambda rng, e: literal(e, "".join(rng.choice("ab ü🚀") for _ in range(rng.randint(30, 100)))))


@dataclass(frozen=True)
class Change:
    """`kind`: add | drop | rename | widen | int_to_bigint | add_table | set_default | rename_table; `column`: the
    column it adds, drops, renames, retypes or sets the default of (a PostgreSQL table rename's: the key column its
    row change sets to itself); `to`: the kind it adds or retypes to, the new
    name (of the column, or of the table), or the new default (none: DROP DEFAULT); `created`: the table add_table
    creates."""
    kind: str
    table: str
    column: str
    to: str = ""
    created: Table | None = None

    def statements(self, engine: str, namespace: str) -> list[str]:
        """The change's transaction: its statement, and after a CREATE TABLE the DDL that goes with it (its types
        exist already: the table's kinds are those of a table of the scenario)."""
        if self.kind == "rename_table" and engine == POSTGRES:  # a row change, so that the log meets it (above)
            new, key = f"{q(engine, namespace)}.{q(engine, self.to)}", q(engine, self.column)
            return [self.statement(engine, namespace),
                    f"UPDATE {new} SET {key} = {key} WHERE ctid = (SELECT ctid FROM {new} LIMIT 1)"]
        if self.kind != "add_table":
            return [self.statement(engine, namespace)]
        ddl = self.created.ddl(engine, namespace)
        return ddl[next(i for i, d in enumerate(ddl) if d.startswith("CREATE TABLE")):]

    def statement(self, engine: str, namespace: str) -> str:
        if self.kind == "add_table":
            return self.statements(engine, namespace)[0]
        table = f"ALTER TABLE {q(engine, namespace)}.{q(engine, self.table)}"
        if self.kind == "rename_table":  # MySQL's two ways to say it, by a coin of the change's own
            new = f"{q(engine, namespace)}.{q(engine, self.to)}"
            if engine == POSTGRES:
                return f"{table} RENAME TO {q(engine, self.to)}"
            return f"{table} RENAME TO {new}" if _coin(f"{self.table}.alter_rename") else \
                f"RENAME TABLE {q(engine, namespace)}.{q(engine, self.table)} TO {new}"
        column = q(engine, self.column)
        kind = BY_NAME.get(self.to)
        if self.kind == "add":
            return f"{table} ADD COLUMN {column} {kind.ddl[engine]} DEFAULT {DEFAULTS[self.to]}"
        if self.kind == "drop":
            return f"{table} DROP COLUMN {column}"
        if self.kind == "rename":
            return f"{table} RENAME COLUMN {column} TO {q(engine, self.to)}"
        if self.kind == "set_default":
            return f"{table} ALTER COLUMN {column} " + (f"SET DEFAULT {self.to}" if self.to else "DROP DEFAULT")
        if engine == MYSQL:
            # An added column's default, which MODIFY drops unless repeated: in half the changes (by a stream of
            # the change's own), so that the rows there before keep the ADD's default either way on the target.
            kept = DEFAULTS["int" if self.kind == "int_to_bigint" else "varchar"]
            repeat = self.column.startswith("c_add") and _coin(f"{self.table}.{self.column}.{self.kind}")
            return f"{table} MODIFY {column} {kind.ddl[engine]}" + (f" DEFAULT {kept}" if repeat else "")
        return f"{table} ALTER COLUMN {column} TYPE {kind.ddl[engine]}"

    def after(self, table: Table) -> Table:
        """The table as the source has it after the change."""
        if self.kind == "rename_table":
            return replace(table, name=self.to)
        columns = list(table.columns)
        at = next((i for i, (c, _) in enumerate(columns) if c == self.column), None)
        if self.kind == "set_default":
            return table
        if self.kind == "add":
            columns.append((self.column, self.to))
        elif self.kind == "drop":
            del columns[at]
        elif self.kind == "rename":
            columns[at] = (self.to, columns[at][1])
        else:
            columns[at] = (self.column, self.to)
        return replace(table, columns=tuple(columns))

    def describe(self) -> str:
        if self.kind == "add_table":
            return f"add_table({self.table})"
        if self.kind == "rename_table":
            return f"rename_table({self.table} -> {self.to})"
        return f"{self.kind}({self.table}.{self.column}{' -> ' + self.to if self.to else ''})"


def _add(rng: random.Random, table: Table, engine: str, number: int) -> Change | None:
    return Change("add", table.name, f"c_add{number}", rng.choice(sorted(DEFAULTS)))


def _coin(name: str) -> bool:
    """Heads or tails from `name` alone: a choice made without drawing from the seed's streams, so that every seed
    keeps the scenario it drew before the choice existed."""
    return zlib.crc32(name.encode()) % 2 == 0


def _later_default(added: Change) -> Change | None:
    """After half the ADD COLUMNs, at once (before a sync meets the ADD, as a rule), a new default or none: the rows
    there at the ADD keep the ADD's on the source."""
    if not _coin(f"{added.table}.{added.column}.later"):
        return None
    to = LATER_DEFAULTS[added.to] if _coin(f"{added.table}.{added.column}.set") else ""
    return Change("set_default", added.table, added.column, to)


def _drop(rng: random.Random, table: Table, engine: str, number: int) -> Change | None:
    return Change("drop", table.name, rng.choice(table.columns)[0]) if len(table.columns) > 1 else None


def _rename(rng: random.Random, table: Table, engine: str, number: int) -> Change | None:
    return Change("rename", table.name, (c := rng.choice(table.columns)[0]), f"{c}_r{number}") if table.columns \
        else None


def _add_table(rng: random.Random, table: Table, engine: str, number: int) -> Change | None:
    """A new table of `table`'s columns under an int key, not partitioned."""
    return Change("add_table", f"tn{number}", "", created=Table(f"tn{number}", "int", "", table.columns, 0))


def _retype(old: str, new: str, kind: str):
    def draw(rng: random.Random, table: Table, engine: str, number: int) -> Change | None:
        found = [c for c, k in table.columns if k == old]
        return Change(kind, table.name, rng.choice(found), new) if found else None
    return draw


MENU = [_add, _drop, _rename, _retype("varchar", "varchar100", "widen"), _retype("int", "bigint", "int_to_bigint")]
WEIGHTS = [3, 1, 1, 2, 2]
ADD_TABLE_SHARE = 0.3  # of the scenarios with schema changes, drawn from a stream of its own (see draw_log)
RENAME_TABLE_SHARE = 0.25  # likewise (on PostgreSQL, of plain tables)


def draw_log(rng: random.Random, work, source: str, namespace: str, adder: random.Random | None = None,
             renamer: random.Random | None = None) -> tuple[tuple, tuple[Change, ...], str]:
    """The log phase's transactions as `work` draws them (the same as without schema changes up to the first),
    with 1-3 changes run between them, each as a transaction of its own; and the policy. `adder`: the stream that
    draws whether a table is created too, and before which transaction (a scenario without one keeps its draws);
    `renamer`: likewise, whether one of the scenario's tables is renamed (its documented stop and way out,
    ways_out.py)."""
    policy = rng.choice(POLICIES)
    count = work.rng.randint(20, 80)
    at = set(rng.sample(range(2, count), k=rng.randint(1, 3)))
    add_at = adder.randrange(2, count) if adder is not None and adder.random() < ADD_TABLE_SHARE else -1
    rename_at = renamer.randrange(2, count) if renamer is not None and renamer.random() < RENAME_TABLE_SHARE else -1
    original = [t.name for t in work.tables]
    transactions, changes = [], []
    for i in range(count):
        drawn = [_draw_change(rng, work.tables, source, len(changes) + 1)] if i in at else []
        if drawn and drawn[0] is not None and drawn[0].kind == "add" and (later := _later_default(drawn[0])):
            drawn.append(later)
        if i == add_at:
            drawn.append(_add_table(adder, adder.choice(work.tables), source, len(changes) + len(drawn) + 1))
        renamable = [t for t in work.tables if t.name in original and (source == MYSQL or not t.partitions)]
        if i == rename_at and renamable:  # a leaf partition keeps its name: written under it
            first = renamer.choice(renamable)
            others = [t for t in renamable if t is not first]
            # half the time a second table at once: a run that begins after both finds neither by its old name
            for table in [first, *([renamer.choice(others)] if others and renamer.random() < 0.5 else [])]:
                drawn.append(Change("rename_table", table.name, "" if source == MYSQL else table.key_columns[0],
                                    f"{table.name}_rn{len(changes) + len(drawn) + 1}"))
        for change in drawn:
            if change is not None:
                if change.created is not None:
                    work.add(change.created)
                elif change.kind == "rename_table":
                    work.rename(change.table, change.to)
                else:
                    index = next(n for n, t in enumerate(work.tables) if t.name == change.table)
                    work.tables[index] = change.after(work.tables[index])
                changes.append(change)
                transactions.append(tuple(change.statements(source, namespace)))
        transactions.append(tuple(work.transaction(big=work.rng.random() < 0.1)))
    return tuple(transactions), tuple(changes), policy


def _draw_change(rng: random.Random, tables: list[Table], source: str, number: int) -> Change | None:
    for _ in range(10):
        table = rng.choice(tables)
        change = rng.choices(MENU, WEIGHTS)[0](rng, table, source, number)
        if change is not None:
            return change
    return None


def tables_after(tables: tuple[Table, ...], changes: tuple[Change, ...], written: tuple[tuple[str, ...], ...],
                 source: str, namespace: str) -> tuple[Table, ...]:
    """The source's tables once the transactions `written` ran: with the changes among them, and the tables
    they created after the others."""
    ran = {s for tx in written for s in tx}
    out = {t.name: t for t in tables}
    for change in changes:
        if change.statement(source, namespace) in ran:
            renamed = change.kind == "rename_table"
            out[change.to if renamed else change.table] = change.created or change.after(
                out.pop(change.table) if renamed else out[change.table])
    return tuple(out.values())


# A statement that changes rows, and the table (or leaf partition, `<table>_p<n>`) it names.
ROW_CHANGE = re.compile(r'(?:INSERT INTO|UPDATE|DELETE FROM) [`"][^`"]+[`"]\.[`"]([^`"]+?)(?:_p\d+)?[`"] ')


def _rows_changed(transaction: tuple[str, ...]) -> set[str]:
    """The tables whose rows `transaction` changes, less what it rolled back to its savepoint."""
    out, undone = set(), False
    for statement in transaction:
        undone = statement.startswith("SAVEPOINT") or (undone and not statement.startswith("ROLLBACK TO"))
        if not undone and (found := ROW_CHANGE.match(statement)):
            out.add(found.group(1))
    return out


def target_names(tables: tuple[Table, ...], changes: tuple[Change, ...], written: tuple[tuple[str, ...], ...],
                 source: str, namespace: str) -> dict[str, dict[str, str | None]]:
    """Per table, the name each column of the source's (tables_after) has on the target once a sync caught up
    with `written`, None for one not there yet (docs/concepts/log-phase.md "Schema changes"). A MySQL binlog
    carries the DDL: every change is met. PostgreSQL's log carries a change only in the Relation message before
    the table's next row change: one that no row change of its table followed is not met yet, so a renamed
    column stays under its old name and an added one is not there. A plan that read the table since (a re-plan,
    the snapshot of an added table) gave the target its columns: WaysOut.seen, not known here."""
    names = {t.name: {c: c for c, _ in t.columns} for t in tables}
    changed = [_rows_changed(tx) for tx in written]
    for change in changes:
        at = next((i for i, tx in enumerate(written) if change.statement(source, namespace) in tx), None)
        if at is None:
            continue
        if change.created is not None:
            names[change.table] = {c: c for c, _ in change.created.columns}
            continue
        if change.kind == "rename_table":  # met (on PostgreSQL, by its row change): the new name's from a snapshot
            names[change.to] = names.pop(change.table)
            continue
        met = source != POSTGRES or any(change.table in rows for rows in changed[at + 1:])
        columns = names[change.table]
        if change.kind == "add":
            columns[change.column] = change.column if met else None
        elif change.kind == "drop":
            columns.pop(change.column, None)
        elif change.kind == "rename":
            old = columns.pop(change.column, change.column)
            columns[change.to] = change.to if met else old
    return names


def added_tables(changes: tuple[Change, ...], written: tuple[tuple[str, ...], ...], source: str,
                 namespace: str) -> list[str]:
    """The tables created by the transactions `written`."""
    ran = {s for tx in written for s in tx}
    return [c.table for c in changes if c.kind == "add_table" and c.statement(source, namespace) in ran]


def left_out(changes: tuple[Change, ...], policy: str) -> dict[str, set[str]]:
    """Columns the target does not get (until a re-plan sees them): the ones added under `ignore`, under any name
    a rename gives them (a change confined to columns left out goes on)."""
    out: dict[str, set[str]] = {}
    for change in changes:
        if change.kind == "add" and policy == "ignore":
            out.setdefault(change.table, set()).add(change.column)
        elif change.kind == "rename_table" and change.table in out:
            out[change.to] = set(out[change.table])  # the old name's still holds before the rename
        elif change.kind == "rename" and change.column in out.get(change.table, set()):
            out[change.table].add(change.to)
    return out
