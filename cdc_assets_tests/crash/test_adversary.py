"""The seeded adversary (cdc_assets_tests/adversary) on a fixed list of seeds, one or more per direction: each
scenario's random tables, values, workload and faults must end with the target equal to the source, and no
checkpoint moving back. A failing seed reruns alone with `python -m cdc_assets_tests.adversary --seed N
--scenarios 1 --direction D`."""
import re
import subprocess
import sys
from dataclasses import replace

import pytest
import yaml

from cdc_assets_tests.adversary import faults
from cdc_assets_tests.adversary.faults import Injected, PostgresTargetAway, TargetAway, Terminate
from cdc_assets_tests.adversary.kinds import BY_NAME, KINDS
from cdc_assets_tests.adversary.oracle import differences
from cdc_assets_tests.adversary.runner import Servers, run
from cdc_assets_tests.adversary.scenario import build
from cdc_assets_tests.adversary.schema import Table
from cdc_assets_tests.adversary.schema_changes import Change, left_out, target_names
from cdc_assets_tests.adversary.shrink import halves, without_table
from cdc_assets_tests.adversary.targets import Target, tolerates
from cdc_assets_tests.adversary.ways_out import FALSE_STOP, WaysOut

pytestmark = [pytest.mark.crash, pytest.mark.spark]

SEEDS = [
    (10, "mysql-postgres"),  # composite _ci and _bin text keys, TOASTed text, sjis and utf16 text; exactly-once; kill,
    # crash point, SIGTERM; a savepoint before the second half's writes, rolled back to at its quiet point; a reset to
    # the checkpoint at the first quiet point
    (26, "mysql-mysql"),  # three tables into a MySQL target, a savepoint before the first log writes, a kill: the
    # apply thread's before-images and the next batch's fit check met on one sink connection before catalog(); a
    # reset back to the first quiet point's checkpoint at the second (a replay)
    (7, "postgres-postgres"),  # composite key, TIME and timestamp(3); random SIGKILL and SIGTERM
    (119, "postgres-mysql"),  # a table keyed by a unique column only, an enum type; crash points in the snapshot and
    # the log, a kill
    (13, "mysql-postgres"),  # SIGKILL after a split's commit in the snapshot; a big transaction in parts; a savepoint
    # by `sync --savepoint-on-stop` under SIGTERM while the application writes
    (10, "mysql-three"),  # into pg_a, pg_b (optional) and maria under commit_policy required; exactly-once; a kill,
    # a crash point, SIGTERM; a reset to the checkpoint at the first quiet point; a savepoint on every target before
    # the second half's writes, rolled back on every target at its quiet point (about 20 s)
]

# Schema changes in the log phase (`--schema-changes`), with the ways out each must take. Seed 2, one per source:
# under halt an added column, renamed in the same segment (the way out, apply_add_columns, then stops for the
# rename: a re-plan), then a varchar widened past what the target column holds (the ALTER the stop names, on the
# target); about 30-50 s each. Seed 404 (MySQL -> MySQL): a table created by the application and added to the
# running task, a table renamed (its new name in source.tables, and its snapshot), a varchar widened (the ALTER the
# stop names, on the target); about 40 s. A re-plan that must widen a target column itself: integration/test_schema_change_follow.py.
SCHEMA_SEEDS = [(2, "mysql-postgres", {"policy", "replan", "alter_target"}),
                (2, "postgres-postgres", {"policy", "replan", "alter_target"}),
                (404, "mysql-mysql", {"rename_table", "add_tables"}),  # two tables renamed, one at a kill
                # an ADD COLUMN's default changed (set, dropped) before the sync met the ADD: the rows there before
                # keep the ADD's on the target too
                # (4: then the table renamed after a column added to it, which the sync meets first, with the table
                # gone under its old name; 36: a PostgreSQL table renamed first, under halt)
                (4, "mysql-postgres", {"policy", "rename_table"}), (36, "postgres-mysql", {"policy", "rename_table"}),
                # a column renamed after its table's last row change: PostgreSQL's log never tells, the target keeps
                # the values under the old name and the verification at the end calls the table's splits
                # inconclusive, as the docs say (with a re-plan before the log phase, a key move's way out); 40 s
                (100079, "postgres-postgres", {"replica_identity_full"}),
                # into three targets: under halt an added column, a re-plan, then the ALTERs the stops name for the
                # MariaDB and the PostgreSQL targets (about 35 s); a table added to the running task, and a kill
                # after one target's lane checkpointed an added column and before the others met it (about 25 s)
                (2, "mysql-three", {"policy", "replan", "alter_target"}),
                (5, "postgres-three", {"add_tables"})]

# A PostgreSQL key move the log leaves incomplete, whose stop's way out (REPLICA IDENTITY FULL on the source table,
# then a re-plan and a snapshot) the scenario takes before it goes on; about 20 s.
MOVE_SEEDS = [(204, "postgres-postgres")]


# Seeds that stop loudly (documented): a PostgreSQL key move whose TOASTed text is unchanged, replayed onto a
# target that already holds a later state where the batch cannot tell which row is the moved one (MoveIncomplete,
# way out REPLICA IDENTITY FULL and a re-plan, which the scenario takes unless it draws a savepoint or a reset):
# 110 (a savepoint, so it stays stopped), 204 postgres-postgres; 150 postgres-mysql, which pass after the way out. Seeds whose zero date stops
# the task as mysql.md documents (`expected_stop`): 14 and 22 mysql-mysql; 22, 30, 32, 37, 44, 54 mysql-postgres.
# Rerun one with `python -m cdc_assets_tests.adversary --seed N --scenarios 1 --direction D --confirm`.
# Seeds that once stopped with a false MoveIncomplete (a later part of a transaction in parts took the move mark its
# earlier part wrote for a previous application's) and now pass: 20 postgres-postgres and postgres-mysql; 11, 12
# and 124 postgres-mysql; 11 and 12 postgres-three; 5 postgres-postgres.


# Seeds run with a fault only a flag asks for (`--target-away-pg`, `--restart`), by build()'s keyword for it.
FLAGGED = [
    (2, "mysql-postgres", "away_pg"),  # exactly-once; the PostgreSQL target's database closed for 6 s while the
    # sync applies: its sessions ended under the target's resumer, whose driver error failed the sync
    (4, "postgres-postgres", "away_pg"),  # the target closed for 8 s after a kill and a crash point: it reconnects
    (1, "postgres-postgres", "restart"),  # the PostgreSQL server restarted: the source and the target with it
    (1, "mysql-mysql", "restart"),  # the source MariaDB down as the sync starts: its capture check failed the sync
    (100262, "postgres-postgres", "restart"),  # a transaction in parts inserts two rows with TOASTed text and swaps
    # their keys in a later part; killed after the target's commit, its replay's first part puts the rows back as
    # inserted before the swap part runs (about 30 s)
]


@pytest.mark.parametrize("seed, direction", SEEDS)
def test_seeded_scenario_ends_with_the_target_equal_to_the_source(tmp_path, servers, mariadb_target, spark, seed,
                                                                   direction):
    scenario = build(seed, direction)
    outcome = run(scenario, Servers(servers.mariadb, servers.postgres, mariadb_target, spark, tmp_path))
    assert outcome.status == "pass", f"{scenario.describe()}\n{outcome.line()}"
    assert outcome.faults, "every scenario injects at least one fault"


@pytest.mark.parametrize("seed, direction, flag", FLAGGED)
def test_seeded_scenario_with_a_server_away_ends_equal(tmp_path, servers, mariadb_target, spark, seed, direction,
                                                       flag):
    scenario = build(seed, direction, **{flag: True})
    outcome = run(scenario, Servers(servers.mariadb, servers.postgres, mariadb_target, spark, tmp_path))
    assert outcome.status == "pass", f"{scenario.describe()}\n{outcome.line()}"
    away = [f for f in outcome.faults if f.startswith(("target_away_pg(", "restart("))]
    assert away and all(" gave_up" not in f for f in away), outcome.faults  # the sync retried, as documented


# An operator's `plan --replan` and `snapshot` while the application writes (`--replan`): every table read again,
# the checkpoint discarded, the sync joining each table from its new snapshot.
REPLAN_SEEDS = [
    (205, "postgres-postgres"),  # a kill at a crash point, then the re-plan in the second segment (about 30 s)
]


@pytest.mark.parametrize("seed, direction", REPLAN_SEEDS)
def test_seeded_operator_replan_ends_equal(tmp_path, servers, mariadb_target, spark, seed, direction):
    scenario = build(seed, direction, replan=True)
    outcome = run(scenario, Servers(servers.mariadb, servers.postgres, mariadb_target, spark, tmp_path))
    assert outcome.status == "pass", f"{scenario.describe()}\n{outcome.line()}"
    assert any(f.startswith("replan(") and f.endswith(" applied") for f in outcome.faults), outcome.faults


@pytest.mark.parametrize("seed, direction, ways", SCHEMA_SEEDS)
def test_seeded_schema_changes_end_with_the_target_equal_in_the_columns_the_docs_promise(tmp_path, servers,
                                                                                        mariadb_target, spark, seed,
                                                                                        direction, ways):
    scenario = build(seed, direction, schema_changes=True)
    outcome = run(scenario, Servers(servers.mariadb, servers.postgres, mariadb_target, spark, tmp_path))
    assert outcome.status == "pass", f"{scenario.describe()}\n{outcome.line()}"
    assert ways <= _ways_out(outcome), outcome.line()


@pytest.mark.parametrize("seed, direction", MOVE_SEEDS)
def test_seeded_key_move_stop_s_way_out_ends_with_the_target_equal(tmp_path, servers, mariadb_target, spark, seed,
                                                                   direction):
    scenario = build(seed, direction)
    outcome = run(scenario, Servers(servers.mariadb, servers.postgres, mariadb_target, spark, tmp_path))
    assert outcome.status == "pass", f"{scenario.describe()}\n{outcome.line()}"
    assert "replica_identity_full" in _ways_out(outcome), outcome.line()


def _ways_out(outcome) -> set[str]:
    """The ways out applied, and `add_tables` when the harness added a table to the task."""
    return {f.split("(")[0][len("way_out_"):] for f in outcome.faults if f.startswith("way_out_")} | \
        {"add_tables" for f in outcome.faults if f.startswith("add_tables(")}


def test_a_scenario_is_its_seed():
    assert build(11, "mysql-postgres") == build(11, "mysql-postgres")
    assert build(11, "mysql-postgres") != build(12, "mysql-postgres")
    drawn = {build(s).direction for s in range(8)}  # each build writes kilobytes of random text: a few suffice
    assert drawn == {"mysql-postgres", "mysql-mysql", "postgres-postgres", "postgres-mysql"}  # never a three
    three = build(11, "mysql-three")
    assert three == build(11, "mysql-three") and [t.name for t in three.targets] == ["pg_a", "pg_b", "maria"]
    assert build(11, "mysql-postgres").tables == three.tables  # the targets come from a stream of their own
    assert [f for f in build(2, "mysql-mysql", reset=False).faults if f.kind != "reset"] == \
        [f for f in build(2, "mysql-mysql").faults if f.kind != "reset"]  # and so does the reset


def test_the_policy_says_which_target_may_fall_behind():
    pg_a, pg_b, maria = Target("pg_a", "postgres"), Target("pg_b", "postgres", False), Target("maria", "mysql", False)
    three = (pg_a, pg_b, maria)
    assert not tolerates("all", three, "maria") and tolerates("quorum(2)", three, "pg_a")
    assert tolerates("required", three, "maria") and not tolerates("required", three, "pg_a")
    assert not tolerates("required", (pg_a,), "pg_a")
    # behind a PostgreSQL source an optional maria away is lost (several-targets.md): never drawn there
    scenario = build(1, "postgres-three")
    assert TargetAway().applies(replace(scenario, commit_policy="all"))
    assert not TargetAway().applies(replace(scenario, commit_policy="quorum(2)"))
    assert TargetAway().applies(replace(scenario, direction="mysql-three", commit_policy="quorum(2)"))


def test_the_new_faults_come_only_when_asked_and_leave_the_rest_of_the_scenario_as_it_was():
    for direction in ("mysql-postgres", "postgres-postgres", "mysql-three"):
        plain, both = build(3, direction), build(3, direction, away_pg=True, restart=True)
        assert [f for f in both.faults if f.kind not in ("target_away_pg", "restart")] == list(plain.faults)
        assert both.tables == plain.tables and both.during_log == plain.during_log
        assert "restart" in {f.kind for f in both.faults}
    assert "target_away_pg" in {f.kind for f in build(3, "mysql-postgres", away_pg=True).faults}
    assert "target_away_pg" not in {f.kind for f in build(3, "mysql-mysql", away_pg=True).faults}
    # pg_a, the first target, on the terms of maria: behind a PostgreSQL source only when the policy needs it
    scenario = build(1, "postgres-three")
    assert PostgresTargetAway().applies(replace(scenario, commit_policy="all"))
    assert not PostgresTargetAway().applies(replace(scenario, commit_policy="quorum(2)"))
    (_, first), (_, second) = build(3, "mysql-three", away_pg=True).segments()
    assert "target_away_pg" in {f.kind for f in first + second}
    for seed in range(1, 6):  # an operator's re-plan: only when asked, voiding the seed's savepoint and reset only
        plain, replanned = build(seed, "mysql-mysql"), build(seed, "mysql-mysql", replan=True)
        assert [f for f in replanned.faults if f.kind != "replan"] == [
            f for f in plain.faults if f.kind not in ("savepoint", "reset")]
        assert [f.kind for f in replanned.faults].count("replan") == 1 and replanned.tables == plain.tables


def test_a_reset_replays_or_moves_nothing_and_goes_back_only_in_the_second_segment():
    resets = [f for s in range(1, 13) for d in ("mysql-mysql", "postgres-postgres")
              for f in build(s, d, reset=True).faults if f.kind == "reset"]
    assert {f.point for f in resets} == {"same", "back", "earliest"}
    assert all(f.nth == 2 for f in resets if f.point == "back")
    assert "reset(" in build(3, "postgres-mysql", reset=True).script()


def test_the_oracle_names_missing_extra_and_changed_rows():
    source = {("1",): {"c": 1}, ("2",): {"c": 2}}
    target = {("1",): {"c": 5}, ("3",): {"c": 3}}
    assert differences(source, target) == ["key ('1',): c: target 5, source 1", "key ('2',): missing from the target",
                                           "key ('3',): in the target only"]
    assert differences(source, dict(source)) == []


def test_compare_rules_equate_only_the_documented_renderings():
    time = BY_NAME["time"].canon  # MySQL TIME into a PostgreSQL interval, printed in hours
    assert time("-00:00:01.500000") == time("-00:00:01.5") == -1_500_000
    assert time("838:59:59.000000") == time("838:59:59") != time("34 days 22:59:59")
    assert time("24:00:00") == 86_400_000_000
    assert BY_NAME["double"].canon("-0") != BY_NAME["double"].canon("0")
    assert BY_NAME["json"].canon('{"a": 1.5e3}') == BY_NAME["json"].canon('{"a":1500}')
    assert BY_NAME["bit"].canon("0000000101") == BY_NAME["bit"].canon("101")
    assert BY_NAME["datetime"].canon("2024-02-29 12:00:00.500000") == BY_NAME["datetime"].canon("2024-02-29 12:00:00.5")
    assert BY_NAME["time3"].canon("-00:00:00.001") == -1_000 != BY_NAME["time3"].canon("00:00:00.001")
    utc = BY_NAME["timestamptz"].canon  # PostgreSQL's text at UTC against a MySQL datetime holding UTC
    assert utc("2024-03-31 00:30:00.5") == utc("2024-03-31 00:30:00.500000") != utc("2024-03-31 02:30:00.5")
    assert utc("infinity") == "infinity"
    for kind in KINDS:
        assert all("{c}" in kind.text[engine] for engine in kind.ddl), kind.name


def test_a_zero_date_written_makes_the_documented_stop_the_expected_outcome():
    zero = next(build(s, "mysql-postgres") for s in range(1, 200) if build(s, "mysql-postgres").expected_stops())
    assert any(s.startswith("SET SESSION sql_mode") for s in zero.session)
    assert re.search(zero.expected_stops()[0], "ZeroDateError: row (7,) of adv.t0: column 'c_zero_date' ...")
    assert not re.search(zero.expected_stops()[0], "MoveIncomplete: cannot move the row")
    value = next(v for v in ("0000-00-00", "2020-00-15", "2021-02-00") if v in zero.expected_stops()[0])
    three = (f"SplitFailed: ... 0 of 3 targets acknowledged (none); ... {{'maria': 'failed: (1292, \"Incorrect date "
             f"value: \\'{value}\\' for column ...\")'}}")  # the targets' reasons as the split's message quotes them
    assert re.search(zero.expected_stops()[0], three), three
    assert build(10, "mysql-postgres").expected_stops() == []


def test_a_savepoint_falls_in_the_segment_it_names_first():
    scenario = next(build(s, "mysql-mysql") for s in range(1, 200)
                    if any(f.kind == "savepoint" and f.nth == 2 for f in build(s, "mysql-mysql").faults))
    (_, first), (_, second) = scenario.segments()
    assert second[0].kind == "savepoint" and all(f.kind != "savepoint" for f in first)
    assert "then savepoint rollback" in scenario.script()


def test_the_shrinker_removes_a_table_with_every_statement_naming_it():
    scenario = build(110, "postgres-postgres")
    smaller = without_table(scenario, "t0")
    assert [t.name for t in smaller.tables] == ["t1", "t2"]
    statements = [*smaller.setup, *(s for tx in smaller.during_snapshot + smaller.during_log for s in tx)]
    assert statements and not any('."t0"' in s for s in statements)
    assert all(tx for tx in smaller.during_log)
    assert [len(c) for c in halves(tuple(range(4)))] == [2, 2, 3, 3, 3, 3]


def test_schema_changes_leave_the_seed_as_it_was_up_to_the_first_and_writes_follow_them():
    for seed, direction in [(3, "mysql-postgres"), (6, "postgres-mysql"), (2, "mysql-mysql")]:
        plain, changed = build(seed, direction), build(seed, direction, schema_changes=True)
        assert plain == build(seed, direction, schema_changes=False) and not plain.changes and changed.changes
        assert (changed.tables, changed.setup, changed.during_snapshot) == \
            (plain.tables, plain.setup, plain.during_snapshot)
        ddl = [i for i, tx in enumerate(changed.during_log) if tx[0].startswith("ALTER TABLE")]
        assert len(ddl) == len(changed.changes) and changed.during_log[:ddl[0]] == plain.during_log[:ddl[0]]
        assert [f for f in changed.faults if f.kind not in ("savepoint", "reset")] == \
            [f for f in plain.faults if f.kind not in ("savepoint", "reset")]
        assert changed.tables_at(2) != changed.tables  # the oracle's columns at the end
        for change in changed.changes:  # no write names a column after the change took it away
            gone = f"`{change.column}`" if changed.source == "mysql" else f'"{change.column}"'
            after = [s for tx in changed.during_log[changed.during_log.index((change.statement(
                changed.source, changed.namespace),)) + 1:] for s in tx if f".`{change.table}`" in s or
                f'."{change.table}"' in s]
            if change.kind in ("drop", "rename") and not any(c.column == change.column and c.kind == "add"
                                                             for c in changed.changes):
                assert not any(gone in s for s in after if not s.startswith("ALTER")), change
    assert "schema changes under" in build(3, "mysql-postgres", schema_changes=True).describe()
    three = build(3, "mysql-three", schema_changes=True)
    assert three.changes and three.tables == build(3, "mysql-three").tables


def test_a_stop_the_scenario_drew_no_cause_for_is_false_though_it_names_a_way_out(tmp_path):
    path = tmp_path / "task.yaml"
    path.write_text("pipeline: {schema_change_policy: halt}\n")
    plain, changed = build(2, "mysql-postgres"), build(2, "mysql-postgres", schema_changes=True)
    added = next(c.table for c in changed.changes if c.kind == "add")
    halted = (f"DDL on captured table {plain.namespace}.{added} at mysql-bin.000001:4 stops the incremental phase "
              "(schema_change_policy halt): ALTER TABLE ... ADD COLUMN; set pipeline.schema_change_policy: "
              "apply_add_columns to follow it")
    way, wrong = WaysOut(plain, None, plain.namespace, path, {}).apply(halted)
    assert way == "policy" and FALSE_STOP in wrong and added in wrong
    assert "halt" in path.read_text()  # the way out was not taken
    ways = WaysOut(changed, None, changed.namespace, path, {})
    assert ways.cause("policy", f"{changed.namespace}.{added}")
    assert not ways.cause("replan", f"{changed.namespace}.{added}") or any(
        c.table == added and c.kind in ("drop", "rename") for c in changed.changes)
    assert not ways.cause("replica_identity_full", f"{changed.namespace}.{added}")  # a MySQL source: never
    way, wrong = ways.apply(halted)
    assert (way, wrong) == ("policy", "") and "apply_add_columns" in path.read_text()
    assert not ways.cause("policy", f"{changed.namespace}.{added}")  # no longer under halt


def test_a_renamed_table_is_written_and_compared_under_its_new_name():
    scenario = build(4, "mysql-postgres", schema_changes=True)
    renamed = next(c for c in scenario.changes if c.kind == "rename_table")
    at = scenario.during_log.index(tuple(renamed.statements("mysql", scenario.namespace)))
    after = [s for tx in scenario.during_log[at + 1:] for s in tx]
    assert any(f".`{renamed.to}` " in s for s in after) and not any(f".`{renamed.table}` " in s for s in after)
    assert renamed.to in {t.name for t in scenario.tables_at(2)} - {t.name for t in scenario.tables}
    assert renamed.table not in {t.name for t in scenario.tables_at(2)}
    assert renamed.to in scenario.target_names_at(2)
    postgres = [(s, c) for s in (build(n, "postgres-postgres", schema_changes=True) for n in range(1, 32))
                for c in s.changes if c.kind == "rename_table"]
    # drawn on PostgreSQL too, plain tables only (a leaf partition keeps its name), under every policy, two at once
    assert {s.schema_policy for s, _ in postgres} == {"halt", "apply_add_columns", "ignore"}
    assert any(len([c for c in s.changes if c.kind == "rename_table"]) == 2 for s, _ in postgres)
    for scenario, renamed in postgres:
        assert not next(t for t in scenario.tables if t.name == renamed.table).partitions
        alter, touch = renamed.statements("postgres", scenario.namespace)
        assert alter.endswith(f'RENAME TO "{renamed.to}"') and touch.startswith(
            f'UPDATE "{scenario.namespace}"."{renamed.to}" SET "{renamed.column}" = "{renamed.column}" ')
        assert (alter, touch) in scenario.during_log  # one transaction: the log meets the rename at its row change


def test_a_column_added_under_ignore_stays_left_out_under_a_new_name():
    changes = (Change("add", "t0", "c_add1", "int"), Change("rename", "t0", "c_add1", "c_add1_r2"))
    assert left_out(changes, "ignore") == {"t0": {"c_add1", "c_add1_r2"}}
    assert left_out(changes, "apply_add_columns") == {}
    moved = changes + (Change("rename_table", "t0", "", "t0_rn3"),)
    assert left_out(moved, "ignore") == {"t0": {"c_add1", "c_add1_r2"}, "t0_rn3": {"c_add1", "c_add1_r2"}}


def test_a_postgres_schema_change_no_row_change_of_its_table_followed_is_not_met_yet():
    tables = (Table("t0", "int", "", (("c_int", "int"), ("c_double", "double")), 2),
              Table("t1", "int", "", (("c_int", "int"),), 0))
    changes = (Change("rename", "t0", "c_double", "c_double_r1"), Change("add", "t0", "c_add2", "int"))
    ddl = [(c.statement("postgres", "adv"),) for c in changes]
    rolled_back = ("SAVEPOINT adv", 'UPDATE "adv"."t0" SET "c_int" = 1 WHERE "k" = 1', "ROLLBACK TO SAVEPOINT adv",
                   'UPDATE "adv"."t1" SET "c_int" = 2 WHERE "k" = 1')
    leaf = ('INSERT INTO "adv"."t0_p1" ("k", "c_int", "c_double_r1", "c_add2") VALUES (1001, 1, 1, 1)',)
    written = (ddl[0], ddl[1], rolled_back)
    assert target_names(tables, changes, written, "postgres", "adv")["t0"] == {
        "c_int": "c_int", "c_double_r1": "c_double", "c_add2": None}  # as before: neither is met
    assert target_names(tables, changes, (*written, leaf), "postgres", "adv")["t0"] == {
        "c_int": "c_int", "c_double_r1": "c_double_r1", "c_add2": "c_add2"}  # a leaf's row change meets both
    assert target_names(tables, changes, (ddl[0], leaf, ddl[1]), "postgres", "adv")["t0"] == {
        "c_int": "c_int", "c_double_r1": "c_double_r1", "c_add2": None}
    mysql = tuple((c.statement("mysql", "adv"),) for c in changes)
    assert target_names(tables, changes, mysql, "mysql", "adv")["t0"] == {
        "c_int": "c_int", "c_double_r1": "c_double_r1", "c_add2": "c_add2"}  # the binlog carries the DDL


# A stand-in for `cdc-assets sync` that answers SIGTERM as the test asks: exit 143 (the batch finished), a loud
# stop of its own met in that batch (exit 2), or the interpreter's default (a traceback, exit 1).
_ON_SIGTERM = """import signal, sys, time
def stop(*_):
    {answer}
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(30)
"""


@pytest.mark.parametrize("answer, status", [
    ("sys.exit(143)", "killed"),
    ("print('error: DDL on captured table s.t at 0/1 stops the incremental phase -- a hint'); sys.exit(2)",
     "stopped"),
    ("raise KeyboardInterrupt", "refused"),
])
def test_a_sigterm_s_answer_is_judged_a_clean_exit_a_loud_stop_or_refused(monkeypatch, answer, status):
    script = _ON_SIGTERM.format(answer=answer)
    monkeypatch.setattr(faults, "run_cli", lambda config, env, *args: subprocess.Popen(
        [sys.executable, "-c", script], start_new_session=True, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True))
    got, out = Terminate().apply(Injected("sigterm", delay=1.0), None, {})
    assert got == status, out
    assert ("error: DDL" in out) == (status == "stopped")


def test_a_postgres_table_renamed_under_ignore_is_compared_with_the_target_table_of_its_old_name(tmp_path):
    """docs/concepts/log-phase.md rule 3: under `ignore` the renamed table goes on into the target table of its old
    name, until its new name is put in source.tables (the way out of a command that reads it by name)."""
    scenario = build(29, "postgres-postgres", schema_changes=True)
    renames = {c.to: c.table for c in scenario.changes if c.kind == "rename_table"}
    assert scenario.schema_policy == "ignore" and len(renames) == 2
    ns = scenario.namespace
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump({"source": {"tables": [f"{ns}.{t.name}" for t in scenario.tables]}}))
    ways = WaysOut(scenario, None, ns, path, {})
    assert ways.target_tables() == renames
    new, old = next(iter(renames.items()))
    path.write_text(yaml.safe_dump({"source": {"tables": [f"{ns}.{new if t.name == old else t.name}"
                                                          for t in scenario.tables]}}))  # as its way out does
    assert ways.target_tables() == {n: o for n, o in renames.items() if n != new}
    halted = build(22, "postgres-postgres", schema_changes=True)  # renamed under halt: stops, no other name
    assert halted.schema_policy == "halt" and WaysOut(halted, None, halted.namespace, path, {}).target_tables() == {}
