"""The ways out of a documented stop, applied as an operator would, so that the scenario goes on and its oracle
still has to pass. Of a schema change's stop (docs/concepts/log-phase.md "Schema changes"): another policy for an
added column under `halt`, the ALTER the error names on the target for a retyped column, `plan --replan` (and the
snapshot it asks for) for a dropped or renamed column, the new name in `source.tables` in place of the old one
(and the snapshot) for a renamed table. Of a PostgreSQL key move the log leaves incomplete
(`MoveIncomplete`, docs/connectors/postgres.md): `REPLICA IDENTITY FULL` on the source table it names, then the
re-plan. A re-plan voids the savepoints and checkpoints from before it: the runner then skips the scenario's
rollbacks and resets that would go back to them. A stop that does not name a table of the task and one of these
ways out is not a documented stop: the scenario stops there. Nor is one whose way out the scenario drew no cause
for (`cause`): a documented stop of a table whose schema did not change is a false stop, and a finding."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from cdc_assets_tests.adversary.faults import outcome, run_cli
from cdc_assets_tests.adversary.kinds import MYSQL, POSTGRES
from cdc_assets_tests.adversary.oracle import columns_of
from cdc_assets_tests.adversary.schema import Table

HALTED = re.compile(r"DDL on captured table (\S+) at .*? stops the incremental phase \(schema_change_policy")
ALTERS = re.compile(r"make the target's columns hold the new definitions \((.*?)\) and run again", re.S)
OTHER_POLICY = "set pipeline.schema_change_policy: apply_add_columns"
MOVE = re.compile(r"cannot move (?:the row|rows) of (\S+) ")
WHOLE_ROWS = "for a partitioned table) makes the log carry whole rows"
RENAMED = re.compile(r"put (\S+) in source\.tables in place of (\S+) \(and in any source setting")
MISSING = re.compile(r"table (\S+) does not exist on ")  # a plan of a table renamed before the log told
GONE = re.compile(r"a later DDL renamed or dropped (\S+): if renamed")  # the rename comes later in the log
FALSE_STOP = "a stop the scenario drew no cause for"
# The schema changes (schema_changes.Change.kind) that may lead to each way out's stop.
# A PostgreSQL ADD COLUMN whose default changed after it, or whose table an ALTER ... TYPE rewrote, stops for a
# re-plan too: the catalog no longer says what the rows there before got.
CAUSES = {"policy": {"add"}, "alter_target": {"widen", "int_to_bigint"},
          "replan": {"drop", "rename", "set_default", "widen", "int_to_bigint"}, "rename_table": {"rename_table"}}


@dataclass
class WaysOut:
    """The ways out one scenario run applied, and what a re-plan saw (its columns are captured from then on)."""
    scenario: object
    servers: object
    ns: str
    path: Path
    env: dict
    watch: object = None
    replanned: int = 0  # re-plans applied so far
    seen: dict[str, set[str]] = field(default_factory=dict)

    def apply(self, out: str) -> tuple[str, str]:
        """(the way out applied, or "" when `out` names none; what went wrong applying it, or "")."""
        ours = {f"{self.ns}.{t}" for t in [t.name for t in self.scenario.tables]
                + [c.table for c in self.scenario.changes if c.created is not None]
                + [c.to for c in self.scenario.changes if c.kind == "rename_table"]}
        move = MOVE.search(out)
        if move is not None and WHOLE_ROWS in out and move.group(1) in ours:
            if not self.cause("replica_identity_full", move.group(1)):
                return "replica_identity_full", self._false(move.group(1))
            return "replica_identity_full", self._whole_rows(move.group(1)) or self.replan()
        missing = MISSING.search(out)
        if missing is not None and (new := self._renamed_to(missing.group(1))):
            return "rename_table", self._renamed(new, missing.group(1))
        halted = HALTED.search(out)
        if halted is None or halted.group(1) not in ours:
            return "", ""
        renamed, gone = RENAMED.search(out), GONE.search(out)
        way = ("rename_table" if renamed or gone else "policy" if OTHER_POLICY in out
               else "alter_target" if ALTERS.search(out) is not None
               else "replan" if "cdc-assets plan --replan" in out else "")
        if way and not self.cause(way, halted.group(1)):
            return way, self._false(halted.group(1))
        if renamed:
            return way, self._renamed(*renamed.groups())
        if gone:  # the rename comes later in the log: the operator knows the name they gave the table
            return way, self._renamed(self._renamed_to(gone.group(1)), gone.group(1))
        if OTHER_POLICY in out:
            raw = yaml.safe_load(self.path.read_text())
            raw.setdefault("pipeline", {})["schema_change_policy"] = "apply_add_columns"
            self.path.write_text(yaml.safe_dump(raw))
            return "policy", ""
        alters = ALTERS.search(out)
        if alters is not None:
            return "alter_target", self._alter_targets(alters.group(1).split("; "))
        if "cdc-assets plan --replan" in out:
            return "replan", self.replan()
        return "", ""

    def cause(self, way: str, qualified: str) -> bool:
        """Did the scenario draw what may lead to `way`'s stop on table `qualified` (namespace.table)? A key move
        the log leaves incomplete needs a PostgreSQL source and an unchanged TOASTed value (a big_text column); the
        other ways out need a schema change of their kind on the table (an added column under `halt` for
        another policy)."""
        name = qualified.split(".")[-1]
        if way == "replica_identity_full":
            tables = [t for t in (*self.scenario.tables, *(c.created for c in self.scenario.changes if c.created))
                      if t.name == name]
            return self.scenario.source != MYSQL and any(k == "big_text" for t in tables for _, k in t.columns)
        if way == "policy" and yaml.safe_load(self.path.read_text()).get("pipeline", {}).get(
                "schema_change_policy", "halt") != "halt":
            return False
        return any(c.table == name and c.kind in CAUSES[way] for c in self.scenario.changes)

    def _false(self, qualified: str) -> str:
        return f"{FALSE_STOP}: no change of {qualified} the scenario made leads to this stop"

    def add_tables(self, names: list[str]) -> None:
        """Add the tables to the task file's source.tables (the next command plans them, with the columns they
        have now: seen)."""
        raw = yaml.safe_load(self.path.read_text())
        raw["source"]["tables"] += [f"{self.ns}.{name}" for name in names]
        self.path.write_text(yaml.safe_dump(raw))
        for name, columns in self._source_columns().items():
            if name in names:
                self.seen.setdefault(name, set()).update(columns)

    def _renamed_to(self, qualified: str) -> str:
        """The name the scenario gave table `qualified` (namespace.table), or ""."""
        return next((f"{self.ns}.{c.to}" for c in self.scenario.changes
                     if c.kind == "rename_table" and f"{self.ns}.{c.table}" == qualified), "")

    def _renamed(self, new: str, old: str, snapshot: bool = True) -> str:
        """The renamed table's new name in source.tables, and in every source setting naming it, in place of the
        old one, then `snapshot` (which plans it and reads it under that name); what went wrong, or ""."""
        raw = yaml.safe_load(self.path.read_text())
        raw["source"]["tables"] = [new if t == old else t for t in raw["source"]["tables"]]
        for setting in raw["source"].values():
            if isinstance(setting, dict) and old in setting:
                setting[new] = setting.pop(old)
        self.path.write_text(yaml.safe_dump(raw))
        name = new.split(".")[-1]
        self.seen.setdefault(name, set()).update(self._source_columns().get(name, set()))
        if not snapshot:
            return ""
        status, out = self._renaming("snapshot")  # a second table renamed with the first
        return "" if status == "passed" else f"snapshot: {status}: {out.strip()[-1500:]}"

    def _renaming(self, *args: str) -> tuple[str, str]:
        """The command's outcome, after putting in source.tables the new name of each renamed table it stopped
        naming (a table renamed since, not met in the log yet: its new name, as the stop says)."""
        for _ in range(len(self.scenario.changes) + 1):
            status, out = outcome(run_cli(self.path, self.env, *args))
            missing = MISSING.search(out) if status == "stopped" else None
            if missing is None or not (new := self._renamed_to(missing.group(1))):
                break
            self._renamed(new, missing.group(1), snapshot=False)
        return status, out

    def _alter_targets(self, statements: list[str]) -> str:
        """The ALTERs a stop named, on every target of their engine (the stop names one target's; the others of
        its engine hold the same tables); what went wrong, or ""."""
        engine = MYSQL if "`" in statements[0] else POSTGRES
        for target in (t for t in self.scenario.targets if t.engine == engine):
            conn = target.connect(self.servers, self.ns)
            try:
                with conn.cursor() as cur:
                    for statement in statements:
                        cur.execute(statement)
            except Exception as exc:  # noqa: BLE001 - the named statement failing is the finding
                return f"the ALTER the stop named failed on {target.name}: {exc}"
            finally:
                conn.close()
        return ""

    def _whole_rows(self, table: str) -> str:
        """The ALTER the stop names, on the source table and each of its partitions; what went wrong, or ""."""
        conn = self.servers.postgres.connect(self.ns)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT relid::regclass::text FROM pg_partition_tree(to_regclass(%s))", (table,))
                for (name,) in cur.fetchall():
                    cur.execute(f"ALTER TABLE {name} REPLICA IDENTITY FULL")
        except Exception as exc:  # noqa: BLE001 - the named statement failing is the finding
            return f"the ALTER the stop named failed: {exc}"
        finally:
            conn.close()
        return ""

    def replan(self) -> str:
        """`plan --replan` and `snapshot` (a way out, or the operator's own re-plan); what went wrong, or ""."""
        with self.watch.rewinding():  # a re-plan discards the checkpoint by design
            for args in (("plan", "--replan"), ("snapshot",)):
                status, out = self._renaming(*args)
                if status != "passed":
                    return f"{' '.join(args)}: {status}: {out.strip()[-1500:]}"
        self.replanned += 1
        for name, columns in self._source_columns().items():
            self.seen.setdefault(name, set()).update(columns)
        return ""

    def _source_columns(self) -> dict[str, set[str]]:
        mysql = self.scenario.source == MYSQL
        server = self.servers.mariadb if mysql else self.servers.postgres
        conn = server.connect(self.ns)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s",
                            (self.ns,))
                rows = cur.fetchall()
        finally:
            conn.close()
        out: dict[str, set[str]] = {}
        for table, column in rows:
            out.setdefault(table, set()).add(column)
        return out

    def on_the_target(self, tables: tuple[Table, ...], names: dict[str, dict[str, str | None]]
                      ) -> tuple[tuple[Table, ...], dict[str, dict[str, str]], list[str]]:
        """The tables to compare, less the columns the docs say the target does not get (yet) and those it lacks;
        the name each has on the target (`names`, Scenario.target_names_at, unless a plan saw it since); and a
        line for each it lacks that it should have (a divergence)."""
        tables = self._compared(tables)
        on_target = {t.name: {c: c if c in self.seen.get(t.name, set()) else names.get(t.name, {}).get(c, c)
                              for c, _ in t.columns} for t in tables}
        on_target = {t: {c: n for c, n in columns.items() if n is not None} for t, columns in on_target.items()}
        present, lacking = self._present(tables), []
        for target in self.scenario.targets:
            on = f"target {target.name}, " if len(self.scenario.targets) > 1 else ""
            lacking += [f"{on}{t.name}: column {n} missing from the target" + (f" (the source's {c})" if n != c else "")
                        for t in tables for c, n in on_target[t.name].items() if n not in present[target.name][t.name]]
        kept = {t.name: {c: n for c, n in on_target[t.name].items()
                         if all(n in present[target.name][t.name] for target in self.scenario.targets)}
                for t in tables}
        return (tuple(replace(t, columns=tuple((c, k) for c, k in t.columns if c in kept[t.name])) for t in tables),
                kept, lacking)

    def target_tables(self) -> dict[str, str]:
        """Per source table a PostgreSQL rename under `ignore` goes on applying to the target table of its old
        name (docs/concepts/log-phase.md "Schema changes", rule 3): that name, while source.tables names it."""
        if self.scenario.source != POSTGRES or self.scenario.schema_policy != "ignore":
            return {}
        listed = set(yaml.safe_load(self.path.read_text())["source"]["tables"])
        return {c.to: c.table for c in self.scenario.changes
                if c.kind == "rename_table" and f"{self.ns}.{c.table}" in listed}

    def _present(self, tables: tuple[Table, ...]) -> dict[str, dict[str, set[str]]]:
        """Per target, per table, the columns it has."""
        out, renamed = {}, self.target_tables()
        for target in self.scenario.targets:
            conn = target.connect(self.servers, self.ns)
            try:
                out[target.name] = {t.name: columns_of(conn, self.ns, replace(t, name=renamed.get(t.name, t.name)))
                                    for t in tables}
            finally:
                conn.close()
        return out

    def unmet(self, names: dict[str, dict[str, str | None]]) -> dict[str, set[str]]:
        """Per table, the source's columns the log phase has not met yet (`names`, Scenario.target_names_at): not
        on the target under their own name, nor seen by a plan since."""
        return {t: {c for c, n in columns.items() if n != c and c not in self.seen.get(t, set())}
                for t, columns in names.items()}

    def _compared(self, tables: tuple[Table, ...]) -> tuple[Table, ...]:
        """The source's tables less the columns the target does not get: added under `ignore`, and not seen by a
        re-plan since."""
        left_out = self.scenario.left_out()
        return tuple(replace(t, columns=tuple((c, k) for c, k in t.columns
                                              if c not in left_out.get(t.name, set()) - self.seen.get(t.name, set())))
                     for t in tables)
