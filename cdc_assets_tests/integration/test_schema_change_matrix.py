"""Every schema change the MySQL DDL classifier and the PostgreSQL drift detector tell apart, under each
schema_change_policy, followed by the way out its stop names: each ends with the target equal to the source on
the captured columns, or stopped with a CdcError (whose way out is a re-plan, or for a renamed table the new name in
source.tables: not run here, each needs a snapshot).

One test per source and policy; each scenario has its own table `<scenario>` (id, v VARCHAR(10), n INT, x INT; x
excluded) and its own task from the log's end (no snapshot, no Spark)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import CdcError
from cdc_assets.sources.postgres.slot import drop_slot, slot_name
from cdc_assets_tests.support import config_for, execute, postgres_target, source_database

POLICIES = ("halt", "ignore", "apply_add_columns")
GO, REPLAN = "go", "replan"  # goes on without a stop; stops, and only a re-plan goes on
RENAMED = "renamed"  # stops, and the new name in source.tables goes on (integration/test_table_renamed.py)
LONG = "z" * 50


@dataclass(frozen=True)
class Scenario:
    ddl: dict[str, list[str]]  # source kind -> statements ({t}: the table)
    dml: list[str]  # after the DDL, in both dialects
    # policy -> GO, REPLAN, or the way out: "target" (the statements the stop names, run on the target) or a policy
    outcome: dict[str, str]
    table: str = "{t}"  # the source table's name afterwards
    columns: tuple[str, ...] = ("id", "v", "n")  # what the source holds of the captured columns afterwards
    # Whether a later run under `halt` stops again: a renamed PostgreSQL table is not recorded under its new name
    # (the task's tables are the configured names), so each run meets the rename again.
    halt_again: bool = False


ALL_GO = dict.fromkeys(POLICIES, GO)
ALL_REPLAN = dict.fromkeys(POLICIES, REPLAN)
WIDER = ["INSERT INTO {t} (id, v, n) VALUES (2, '" + LONG + "', 12.34)", "UPDATE {t} SET n = 0.5 WHERE id = 1"]
PLAIN = ["INSERT INTO {t} (id, v, n) VALUES (2, 'b', 2)", "UPDATE {t} SET v = 'aa' WHERE id = 1"]
SCENARIOS = {
    "index": Scenario({"mysql": ["ALTER TABLE {t} ADD INDEX iv (v), ADD CONSTRAINT cn CHECK (n >= 0)"],
                       "postgres": ["CREATE INDEX ON {t} (v)", "ALTER TABLE {t} ADD CONSTRAINT cn CHECK (n >= 0)"]},
                      PLAIN, ALL_GO),
    "options": Scenario({"mysql": ["ALTER TABLE {t} COMMENT 'c', ROW_FORMAT=DYNAMIC, ALTER v SET DEFAULT 'd'"],
                         "postgres": ["COMMENT ON TABLE {t} IS 'c'", "ALTER TABLE {t} ALTER v SET DEFAULT 'd'"]},
                        PLAIN, ALL_GO),
    "excluded": Scenario({"mysql": ["ALTER TABLE {t} MODIFY x BIGINT", "ALTER TABLE {t} DROP COLUMN x"],
                          "postgres": ["ALTER TABLE {t} ALTER x TYPE bigint", "ALTER TABLE {t} DROP COLUMN x"]},
                         PLAIN, ALL_GO),
    "narrowed": Scenario({"mysql": ["ALTER TABLE {t} MODIFY v VARCHAR(5)"],
                          "postgres": ["ALTER TABLE {t} ALTER v TYPE varchar(5)"]}, PLAIN, ALL_GO),
    "added": Scenario({"mysql": ["ALTER TABLE {t} ADD COLUMN w INT, ADD INDEX iw (w)"],
                       "postgres": ["ALTER TABLE {t} ADD COLUMN w INT"]},
                      ["INSERT INTO {t} (id, v, n, w) VALUES (2, 'b', 2, 2)", "UPDATE {t} SET w = 1 WHERE id = 1"],
                      {"halt": "apply_add_columns", "ignore": GO, "apply_add_columns": GO},
                      columns=("id", "v", "n", "w")),
    "retyped": Scenario({"mysql": ["ALTER TABLE {t} MODIFY v VARCHAR(100), MODIFY n DECIMAL(10,2)"],
                         "postgres": ["ALTER TABLE {t} ALTER v TYPE varchar(100), ALTER n TYPE numeric(10,2)"]},
                        WIDER, dict.fromkeys(POLICIES, "target")),
    "dropped": Scenario({"mysql": ["ALTER TABLE {t} DROP COLUMN n"], "postgres": ["ALTER TABLE {t} DROP COLUMN n"]},
                        ["INSERT INTO {t} (id, v) VALUES (2, 'b')"], ALL_REPLAN, columns=("id", "v")),
    "renamed_column": Scenario({"mysql": ["ALTER TABLE {t} RENAME COLUMN n TO m"],
                                "postgres": ["ALTER TABLE {t} RENAME COLUMN n TO m"]},
                               ["INSERT INTO {t} (id, v, m) VALUES (2, 'b', 2)"], ALL_REPLAN, columns=("id", "v", "m")),
    "truncated": Scenario({"mysql": ["TRUNCATE TABLE {t}"], "postgres": ["TRUNCATE {t}"]}, PLAIN, ALL_REPLAN),
}
# A renamed MySQL table is no longer the captured name: its changes would be lost. PostgreSQL sends them on
# (by relation), so `ignore` applies them to the target table of the old name.
RENAMED_TABLE = {
    "mysql": Scenario({"mysql": ["RENAME TABLE {t} TO {t}_new"]}, PLAIN, dict.fromkeys(POLICIES, RENAMED),
                      table="{t}_new"),
    "postgres": Scenario({"postgres": ["ALTER TABLE {t} RENAME TO {n}_new"]}, PLAIN,
                         {"halt": "ignore", "ignore": GO, "apply_add_columns": "ignore"}, table="{t}_new",
                         halt_again=True),
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("source", ["mysql", "postgres"])
def test_every_schema_change_ends_equal_or_stopped(servers, unique_name, tmp_path, source, policy):
    scenarios = {**SCENARIOS, "renamed_table": RENAMED_TABLE[source]}
    ns = unique_name if source == "mysql" else "s"
    seed = [] if source == "mysql" else [f"CREATE SCHEMA {ns}"]
    seed += [f"CREATE TABLE {ns}.{name} (id INT PRIMARY KEY, v VARCHAR(10), n INT, x INT)" for name in scenarios]
    tgt = postgres_target(servers, f"{unique_name}_tgt")
    with source_database(servers, source, unique_name, seed) as src:
        try:
            for name, scenario in scenarios.items():
                run_scenario(servers, tmp_path, src, tgt, source, unique_name, ns, name, scenario, policy)
        finally:
            tgt.close()


def run_scenario(servers, tmp_path, src, tgt, source, db, ns, name, scenario: Scenario, policy: str) -> None:
    table, target_table = f"{ns}.{name}", f'"{ns}".{name}'
    task_id = f"{db}_{name}"
    runtimes: list[TaskRuntime] = []

    def run(policy: str) -> None:
        config = config_for(tmp_path, servers, task_id=task_id, source=source, source_db=db, tables=[table],
                            target="postgres", target_db=f"{db}_tgt", source_extra={"exclude_columns": {table: ["x"]}},
                            pipeline={"startup_mode": "latest", "schema_change_policy": policy})
        rt = TaskRuntime(config)
        if not runtimes:
            rt.sink.ensure_table(rt.source.describe(config.source.table_ids[0]))
        runtimes.append(rt)
        sync(rt, until_caught_up=True)

    try:
        run(policy)
        execute(src, f"INSERT INTO {table} VALUES (1, 'a', 1, 1)")
        run(policy)
        execute(src, *(s.format(t=table, n=name) for s in scenario.ddl[source]),
                *(s.format(t=scenario.table.format(t=table)) for s in scenario.dml))
        outcome = scenario.outcome[policy]
        if outcome == GO:
            run(policy)
        else:
            with pytest.raises(CdcError) as stop:
                run(policy)
            assert name in str(stop.value), f"{name}: {stop.value}"
            if outcome == REPLAN:
                assert "plan --replan" in stop.value.hint, f"{name}: {stop.value}"
                return
            if outcome == RENAMED:
                assert f"{scenario.table.format(t=table)} in source.tables" in stop.value.hint, stop.value
                return
            if outcome == "target":  # the stop names the statements: run them on the target, and run again
                found = re.search(r"hold the new definitions \((.*)\) and run again", stop.value.hint)
                assert found, stop.value.hint
                execute(tgt, *found.group(1).split("; "))
                run(policy)
            else:
                run(outcome)
        assert_equal(src, tgt, scenario, table, target_table, f"{name} under {policy}")
        execute(src, f"UPDATE {scenario.table.format(t=table)} SET v = 'c' WHERE id = 1")
        if scenario.halt_again:
            with pytest.raises(CdcError, match="renamed to"):
                run("halt")
            return
        run("halt")  # back to the default policy: later runs go on, and keep the target equal
        assert_equal(src, tgt, scenario, table, target_table, f"{name} under {policy}, then halt")
    finally:
        for rt in runtimes:
            rt.close()
        if source == "postgres":
            drop_slot(src, slot_name(task_id))


def assert_equal(src, tgt, scenario: Scenario, table: str, target_table: str, what: str) -> None:
    """The target's rows equal the source's on the captured columns (an added column only where the target got it)."""
    ns, name = table.split(".")
    present = {r[0] for r in _query(tgt, "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                                         "AND table_name = %s", (ns, name))}
    captured = [c for c in scenario.columns if c in present]
    expected, got = _select(src, scenario.table.format(t=table), captured), _select(tgt, target_table, captured)
    assert got == expected, f"{what}: target {got} != source {expected}"


def _select(conn, table: str, columns: list[str]) -> list[tuple]:
    return _query(conn, f"SELECT {', '.join(columns)} FROM {table} ORDER BY id")


def _query(conn, sql: str, args=None) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return [tuple(map(_same, r)) for r in cur.fetchall()]


def _same(value):
    """Numbers compared by value: 12.34 read back from DECIMAL(10,2) and numeric(10,2), 2 from INT and numeric."""
    return Decimal(value).normalize() if isinstance(value, (int, Decimal)) and not isinstance(value, bool) else value
