"""DDL on a captured PostgreSQL table while no run reads the log: the next run compares the first Relation message
of each table with the recorded schema and applies schema_change_policy; DDL no row change followed yet;
generated columns."""
import threading

import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.schema_changes import SchemaChangeHalted
from cdc_assets.engine.verify import INCONCLUSIVE, PASSED, verify_table
from cdc_assets.sources.postgres.slot import drop_slot, slot_name
from cdc_assets_tests.support import (config_for, execute, fetch_rows, postgres_target, snapshot_all,
                                      source_database)


@pytest.fixture
def task(servers, unique_name, tmp_path):
    """(make_runtime(**pipeline), source connection, target connection, namespace). The first runtime made starts
    at the log end; later ones go on from its checkpoint."""
    ns, target = unique_name, f"{unique_name}_tgt"
    seed = [f"CREATE SCHEMA {ns}", f"CREATE TABLE {ns}.t (id INT PRIMARY KEY, v TEXT, n NUMERIC(10,2))",
            f"CREATE TABLE {ns}.g (id INT PRIMARY KEY, a INT, doubled INT GENERATED ALWAYS AS (a * 2) STORED, note TEXT)"]
    servers.postgres.create_database(target)
    tgt = servers.postgres.connect(target)
    with source_database(servers, "postgres", unique_name, seed) as src:
        runtimes = []

        def make(table: str = "t", **pipeline) -> TaskRuntime:
            config = config_for(tmp_path, servers, task_id=unique_name, source="postgres", source_db=unique_name,
                                tables=[f"{ns}.{table}"], target="postgres", target_db=target,
                                pipeline={"startup_mode": "latest", **pipeline})
            rt = TaskRuntime(config)
            if not runtimes:  # later runs see the changed table: only the first one may create the target
                rt.sink.ensure_table(rt.source.describe(config.source.table_ids[0]))
            runtimes.append(rt)
            return rt
        try:
            yield make, src, tgt, ns
        finally:
            for rt in runtimes:
                rt.close()
            tgt.close()


DRIFTS = {
    "drop column": ("ALTER TABLE {ns}.t DROP COLUMN n", "INSERT INTO {ns}.t VALUES (2, 'b')", r"removed \[n\]"),
    "rename column": ("ALTER TABLE {ns}.t RENAME COLUMN n TO m", "INSERT INTO {ns}.t VALUES (2, 'b', 2)",
                      r"added \[m\]; removed \[n\]"),
    "add column": ("ALTER TABLE {ns}.t ADD COLUMN x TEXT", "INSERT INTO {ns}.t VALUES (2, 'b', 2, 'x')", r"added \[x\]"),
    "type change": ("ALTER TABLE {ns}.t ALTER COLUMN n TYPE NUMERIC(10,4)", "INSERT INTO {ns}.t VALUES (2, 'b', 1.2345)",
                    r"retyped \[n\]"),
    "table rename": ("ALTER TABLE {ns}.t RENAME TO t2", "INSERT INTO {ns}.t2 VALUES (2, 'b', 2)", r"renamed to {ns}\.t2"),
}


@pytest.mark.parametrize("drift", list(DRIFTS))
def test_ddl_between_runs_halts_by_default_naming_table_and_change(task, drift):
    make, src, tgt, ns = task
    rt = make()
    sync(rt, until_caught_up=True)
    execute(src, f"INSERT INTO {ns}.t VALUES (1, 'a', 1)")
    sync(rt, until_caught_up=True)
    checkpoint = rt.resumer.checkpoint().position
    ddl, insert, statement = (s.format(ns=ns) for s in DRIFTS[drift])
    execute(src, ddl, insert)  # no run reads the log meanwhile: the next one starts with a fresh connection

    with pytest.raises(SchemaChangeHalted, match=rf"{ns}\.t at {checkpoint} .*{statement}"):
        sync(make(), until_caught_up=True)

    assert fetch_rows(tgt, f'"{ns}".t', "id") == [(1, "a", 1)]
    with pytest.raises(SchemaChangeHalted):  # and it stays halted: the checkpoint is before the change
        sync(make(), until_caught_up=True)
    assert rt.resumer.checkpoint().position == checkpoint


def test_apply_add_columns_follows_a_column_added_between_runs(task):
    make, src, tgt, ns = task
    sync(make(), until_caught_up=True)
    execute(src, f"ALTER TABLE {ns}.t ADD COLUMN x TEXT", f"INSERT INTO {ns}.t VALUES (2, 'b', 2, 'x')")

    report = sync(make(schema_change_policy="apply_add_columns"), until_caught_up=True)

    assert report.schema_version == 1 and fetch_rows(tgt, f'"{ns}".t', "id") == [(2, "b", 2, "x")]
    execute(src, f"INSERT INTO {ns}.t VALUES (3, 'c', 3, 'y')")
    sync(make(), until_caught_up=True)  # the recorded schema now has x: no change for the default policy
    assert fetch_rows(tgt, f'"{ns}".t', "id")[-1] == (3, "c", 3, "y")


def test_ignore_stops_at_a_dropped_captured_column_before_its_short_inserts(task):
    make, src, tgt, ns = task
    sync(make(), until_caught_up=True)
    execute(src, f"ALTER TABLE {ns}.t DROP COLUMN n", f"INSERT INTO {ns}.t VALUES (2, 'b')")

    with pytest.raises(SchemaChangeHalted, match=rf"{ns}\.t .*removed \[n\] .*plan --replan"):
        sync(make(schema_change_policy="ignore"), until_caught_up=True)
    assert fetch_rows(tgt, f'"{ns}".t', "id") == []


def test_generated_columns_are_left_to_the_target(task):
    make, src, tgt, ns = task
    # A PostgreSQL target may declare the column generated itself; the task accepts a target with extra columns.
    execute(tgt, f'CREATE SCHEMA "{ns}"', f'CREATE TABLE "{ns}".g (id INT PRIMARY KEY, a INT, '
                                          f'doubled INT GENERATED ALWAYS AS (a * 2) STORED, note TEXT)')
    rt = make("g")
    assert [c.name for c in rt.source.describe(rt.config.source.table_ids[0]).columns] == ["id", "a", "note"]
    sync(rt, until_caught_up=True)
    execute(src, f"INSERT INTO {ns}.g (id, a, note) VALUES (1, 1, 'one'), (2, 2, 'two')",
            f"UPDATE {ns}.g SET a = 5 WHERE id = 1", f"UPDATE {ns}.g SET note = 'zwei' WHERE id = 2")

    sync(rt, until_caught_up=True)

    assert fetch_rows(tgt, f'"{ns}".g', "id") == fetch_rows(src, f"{ns}.g", "id") == [(1, 5, 10, "one"),
                                                                                      (2, 2, 4, "zwei")]


def test_ignore_keeps_applying_a_renamed_table_to_its_target_table(task):
    make, src, tgt, ns = task
    sync(make(), until_caught_up=True)
    execute(src, f"ALTER TABLE {ns}.t RENAME TO t2", f"INSERT INTO {ns}.t2 VALUES (2, 'b', 2)")

    sync(make(schema_change_policy="ignore"), until_caught_up=True)

    assert fetch_rows(tgt, f'"{ns}".t', "id") == [(2, "b", 2)]


def test_a_renamed_column_no_row_change_followed_stays_under_its_old_name_until_the_next_one(servers, unique_name,
                                                                                              tmp_path):
    """PostgreSQL's log has no DDL: the rename reaches it with the Relation message before the table's next row
    change. Until then the target keeps the values under the old name, and the verification, which reads the
    source's columns as they are now, failed on the target's missing column ("column d2 does not exist")."""
    seed = ["CREATE SCHEMA s", "CREATE TABLE s.t (id INT PRIMARY KEY, v INT, d FLOAT8)",
            "CREATE TABLE s.u (id INT PRIMARY KEY, v INT)", "INSERT INTO s.t VALUES (1, 1, 1.5)",
            "INSERT INTO s.u VALUES (1, 1)"]
    tgt = postgres_target(servers, f"{unique_name}_tgt")
    with source_database(servers, "postgres", unique_name, seed) as src:
        config = config_for(tmp_path, servers, task_id=unique_name, source="postgres", source_db=unique_name,
                            tables=["s.t", "s.u"], target="postgres", target_db=f"{unique_name}_tgt",
                            pipeline={"schema_change_policy": "apply_add_columns", "checkpoint_interval_secs": 0.3})
        rt, syncer, stop = TaskRuntime(config), TaskRuntime(config), threading.Event()
        running = threading.Thread(target=sync, args=(syncer,), kwargs={"stop": stop}, daemon=True)
        try:
            snapshot_all(rt)
            sync(rt, until_caught_up=True)
            execute(src, "ALTER TABLE s.t RENAME COLUMN d TO d2", "UPDATE s.u SET v = 2 WHERE id = 1")
            sync(rt, until_caught_up=True)  # past the rename: no Relation of s.t told of it
            assert fetch_rows(tgt, "s.t", "id") == [(1, 1, 1.5)] and fetch_rows(tgt, "s.u", "id") == [(1, 2)]
            running.start()  # the verification waits for a running sync's checkpoint to pass its reads
            t, u = rt.config.source.table_ids
            [check] = verify_table(rt, t, wait_secs=30)
            assert check.status == INCONCLUSIVE and "(d2)" in check.detail and "next row change" in check.detail
            assert [c.status for c in verify_table(rt, u, wait_secs=30)] == [PASSED]
            stop.set()
            running.join(60)
            execute(src, "UPDATE s.t SET v = 3 WHERE id = 1")
            with pytest.raises(SchemaChangeHalted, match=r"s\.t .*added \[d2\]; removed \[d\].*plan --replan"):
                sync(rt, until_caught_up=True)
        finally:
            stop.set()
            if running.is_alive():
                running.join(60)
            syncer.close()
            rt.close()
            drop_slot(src, slot_name(unique_name))
        assert fetch_rows(tgt, "s.t", "id") == [(1, 1, 1.5)]
    tgt.close()


@pytest.mark.parametrize("policy", ["ignore", "halt"])
def test_tables_renamed_while_no_run_read_the_log_are_told_apart_by_their_relation(servers, unique_name, tmp_path,
                                                                                    policy):
    """A run that starts after captured tables were renamed finds none of them by name. Their relations were taken
    for the first such table of the config: b's rows went into the target's a without a stop under `ignore`, and
    the stop under `halt` named a as the table renamed to b2."""
    seed = ["CREATE SCHEMA s", "CREATE TABLE s.a (id INT PRIMARY KEY, v INT)",
            "CREATE TABLE s.b (id INT PRIMARY KEY, v INT)"]
    tgt = postgres_target(servers, f"{unique_name}_tgt")
    with source_database(servers, "postgres", unique_name, seed) as src:
        config = config_for(tmp_path, servers, task_id=unique_name, source="postgres", source_db=unique_name,
                            tables=["s.a", "s.b"], target="postgres", target_db=f"{unique_name}_tgt",
                            pipeline={"startup_mode": "latest", "schema_change_policy": policy})
        first = TaskRuntime(config)
        try:
            for table in config.source.table_ids:
                first.sink.ensure_table(first.source.describe(table))
            sync(first, until_caught_up=True)
        finally:
            first.close()
        execute(src, "ALTER TABLE s.a RENAME TO a2", "ALTER TABLE s.b RENAME TO b2", "INSERT INTO s.b2 VALUES (2, 2)")
        rt = TaskRuntime(config)
        try:
            if policy == "halt":
                with pytest.raises(SchemaChangeHalted, match=r"put s\.b2 in source\.tables in place of s\.b "):
                    sync(rt, until_caught_up=True)
            else:
                sync(rt, until_caught_up=True)
        finally:
            rt.close()
            drop_slot(src, slot_name(unique_name))
        if policy == "ignore":
            assert (fetch_rows(tgt, "s.a", "id"), fetch_rows(tgt, "s.b", "id")) == ([], [(2, 2)])
    tgt.close()
