"""The application's transactions, generated ahead from the seed against a model of which rows exist (by id and
the case of a text key), so they run without errors and identically on every rerun. Each operation is a list
of statements; a transaction is one or more operations between BEGIN and COMMIT."""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

from cdc_assets_tests.adversary.kinds import POSTGRES
from cdc_assets_tests.adversary.schema import Table, q

Model = dict[str, dict[int, bool]]  # table -> row id -> its text key is in upper case


class Workload:
    """Generates statements for `tables` in `namespace` of a `source` engine into the `targets` engines."""

    def __init__(self, rng: random.Random, tables: list[Table], source: str, targets: tuple[str, ...], namespace: str,
                 late: random.Random | None = None) -> None:
        self.late = late or random.Random(0)  # values of the late kinds' columns (kinds.py)
        self.rng, self.tables, self.source, self.targets, self.ns = rng, tables, source, targets, namespace
        self.model: Model = {t.name: {} for t in tables}
        self.next_id = {t.name: 1 for t in tables}
        self.ops: dict[str, Callable[[Table], list[str]]] = {
            "insert": self.insert, "update": self.update, "delete": self.delete, "key_change": self.key_change,
            "case_change": self.case_change, "swap": self.swap, "reinsert": self.reinsert,
            "savepoint_rollback": self.savepoint_rollback, "leaf_write": self.leaf_write}
        self.weights = {"insert": 4, "update": 6, "delete": 2, "key_change": 2, "case_change": 1, "swap": 1,
                        "reinsert": 1, "savepoint_rollback": 1, "leaf_write": 1}

    def add(self, table: Table) -> None:
        """A table the application created: written from now on."""
        self.tables.append(table)
        self.model[table.name], self.next_id[table.name] = {}, 1

    def rename(self, old: str, new: str) -> None:
        """A table the application renamed: written under its new name from now on."""
        at = next(i for i, t in enumerate(self.tables) if t.name == old)
        self.tables[at] = replace(self.tables[at], name=new)
        self.model[new], self.next_id[new] = self.model.pop(old), self.next_id.pop(old)

    def name(self, table: Table, leaf: str | None = None) -> str:
        return f"{q(self.source, self.ns)}.{q(self.source, leaf or table.name)}"

    def seed_rows(self, table: Table, count: int) -> list[str]:
        return [s for _ in range(count) for s in self.insert(table)]

    def transaction(self, big: bool = False) -> list[str]:
        """One transaction's statements (BEGIN/COMMIT added by the writer); `big`: 40-120 operations."""
        count = self.rng.randint(40, 120) if big else self.rng.randint(1, 5)
        names, weights = list(self.weights), list(self.weights.values())
        statements: list[str] = []
        for _ in range(count):
            table = self.rng.choice(self.tables)
            op = "insert" if big and self.rng.random() < 0.5 else self.rng.choices(names, weights)[0]
            statements += self.ops[op](table)
        return statements

    def _pick(self, table: Table) -> int | None:
        rows = self.model[table.name]
        return self.rng.choice(sorted(rows)) if rows else None

    def _values(self, table: Table) -> list[str]:
        return [kind.value(self.late if kind.late else self.rng, self.source, self.targets) for _, kind in table.kinds()]

    def insert(self, table: Table, ident: int | None = None, into: str | None = None) -> list[str]:
        if ident is None:
            ident = self.next_id[table.name]
            self.next_id[table.name] += 1
        self.model[table.name][ident] = False
        columns = [*table.key_columns, *(c for c, _ in table.columns)]
        values = [*table.key_values(self.source, ident), *self._values(table)]
        return [f"INSERT INTO {self.name(table, into)} ({', '.join(q(self.source, c) for c in columns)}) "
                f"VALUES ({', '.join(values)})"]

    def update(self, table: Table, into: str | None = None, ident: int | None = None) -> list[str]:
        ident = self._pick(table) if ident is None else ident
        early = [(c, k) for c, k in table.kinds() if not k.late]
        if ident is None or not early:
            return self.insert(table)
        chosen = self.rng.sample(early, k=self.rng.randint(1, len(early)))
        chosen += [(c, k) for c, k in table.kinds() if k.late and self.late.random() < 0.5]
        sets = ", ".join(f"{q(self.source, c)} = {k.value(self.late if k.late else self.rng, self.source, self.targets)}"
                         for c, k in chosen)
        where = table.where(self.source, ident, self.model[table.name][ident])
        return [f"UPDATE {self.name(table, into)} SET {sets} WHERE {where}"]

    def delete(self, table: Table) -> list[str]:
        ident = self._pick(table)
        if ident is None:
            return self.insert(table)
        upper = self.model[table.name].pop(ident)
        return [f"DELETE FROM {self.name(table)} WHERE {table.where(self.source, ident, upper)}"]

    def _move(self, table: Table, old: int, new: int, upper: bool = False) -> str:
        """UPDATE giving row `old` the key of id `new` (its text part in upper case with `upper`)."""
        sets = ", ".join(f"{q(self.source, c)} = {v}"
                         for c, v in zip(table.key_columns, table.key_values(self.source, new, upper)))
        where = table.where(self.source, old, self.model[table.name].pop(old))
        self.model[table.name][new] = upper
        return f"UPDATE {self.name(table)} SET {sets} WHERE {where}"

    def key_change(self, table: Table) -> list[str]:
        ident = self._pick(table)
        if ident is None:
            return self.insert(table)
        new = self.next_id[table.name]
        self.next_id[table.name] += 1
        return [self._move(table, ident, new)]

    def case_change(self, table: Table) -> list[str]:
        """A text key rewritten in the other case: the same row under a _ci collation, another key elsewhere."""
        ident = self._pick(table)
        if ident is None or not table.text_key:
            return self.update(table)
        return [self._move(table, ident, ident, not self.model[table.name][ident])]

    def swap(self, table: Table) -> list[str]:
        """Two rows exchange their keys through a third, unused one, in one transaction."""
        rows = sorted(self.model[table.name])
        if len(rows) < 2:
            return self.insert(table)
        a, b = self.rng.sample(rows, 2)
        spare = self.next_id[table.name]
        self.next_id[table.name] += 1
        return [self._move(table, a, spare), self._move(table, b, a), self._move(table, spare, b)]

    def reinsert(self, table: Table) -> list[str]:
        """A row deleted and inserted again under the same key, with new values."""
        ident = self._pick(table)
        if ident is None:
            return self.insert(table)
        return [*self.delete_id(table, ident), *self.insert(table, ident)]

    def delete_id(self, table: Table, ident: int) -> list[str]:
        upper = self.model[table.name].pop(ident)
        return [f"DELETE FROM {self.name(table)} WHERE {table.where(self.source, ident, upper)}"]

    def savepoint_rollback(self, table: Table) -> list[str]:
        """Changes made after a savepoint and rolled back to it: the model forgets them."""
        kept = {t: dict(rows) for t, rows in self.model.items()}
        op = self.rng.choice(["insert", "update", "delete", "key_change"])
        inner = self.ops[op](table)
        self.model = kept
        return ["SAVEPOINT adv", *inner, "ROLLBACK TO SAVEPOINT adv", *self.update(table)]

    def leaf_write(self, table: Table) -> list[str]:
        """On a partitioned PostgreSQL table: an insert or update naming the leaf partition itself."""
        if self.source != POSTGRES or not table.partitions:
            return self.update(table)
        ident = self._pick(table)
        if ident is None or self.rng.random() < 0.5:
            ident = self.next_id[table.name]
            self.next_id[table.name] += 1
            return self.insert(table, ident, into=table.leaf_of(ident))
        return self.update(table, into=table.leaf_of(ident), ident=ident)

