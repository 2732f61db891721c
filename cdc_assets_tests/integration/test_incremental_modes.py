"""Startup modes, schema changes mid-stream and lost positions, on real servers (no snapshot needed: these
modes start from the log)."""
import time
from datetime import datetime, timezone

import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.schema_changes import SchemaChangeHalted
from cdc_assets.errors import ConfigError, PlanError, PositionLost
from cdc_assets_tests.support import config_for, execute, fetch_rows, postgres_target, source_database

SEED = ["CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1), (2, 2)"]


@pytest.fixture
def task(servers, unique_name, tmp_path):
    """(make_runtime(**pipeline), source connection, target connection, database name)"""
    target = f"{unique_name}_tgt"
    tgt = postgres_target(servers, target)
    with source_database(servers, "mysql", unique_name, SEED) as src:
        runtimes = []

        def make(**pipeline) -> TaskRuntime:
            config = config_for(tmp_path, servers, task_id="modes", source="mysql", source_db=unique_name,
                                tables=[f"{unique_name}.t"], target="postgres", target_db=target, pipeline=pipeline)
            rt = TaskRuntime(config)
            rt.sink.ensure_table(rt.source.describe(config.source.table_ids[0]))
            runtimes.append(rt)
            return rt
        yield make, src, tgt, unique_name
        for rt in runtimes:
            rt.close()
    tgt.close()


def rows(tgt, db):
    return fetch_rows(tgt, f'"{db}".t', "id")


def test_initial_mode_refuses_before_the_snapshot_with_what_is_missing(task):
    make, _, _, db = task
    with pytest.raises(PlanError, match=rf"{db}.t is not planned yet"):
        sync(make(), until_caught_up=True)


def test_latest_starts_at_the_log_end_and_a_checkpoint_wins_over_the_mode(task):
    make, src, tgt, db = task
    rt = make(startup_mode="latest")
    assert sync(rt, until_caught_up=True).start_reason.startswith("latest")
    execute(src, "INSERT INTO t VALUES (3, 3)")
    assert sync(rt, until_caught_up=True).start_reason == "checkpoint"
    assert rows(tgt, db) == [(3, 3)]  # rows 1 and 2 predate the start


def test_explicit_position_and_timestamp(task):
    make, src, tgt, db = task
    position = make(startup_mode="latest").source.current_position()
    execute(src, "INSERT INTO t VALUES (10, 10)")
    time.sleep(1.2)  # binlog times are whole seconds
    after = datetime.now(timezone.utc)
    time.sleep(1.2)
    execute(src, "INSERT INTO t VALUES (11, 11)")
    rt = make(startup_mode="position", start_position={"binlog_filename": position.file,
                                                       "next_event_position": position.pos})
    report = sync(rt, until_caught_up=True)
    assert report.start == f"{position.file}:{position.pos}" and rows(tgt, db) == [(10, 10), (11, 11)]

    execute(tgt, f'TRUNCATE "{db}".t')
    rt.resumer.clear()
    timed = make(startup_mode="timestamp", start_timestamp=after.isoformat())
    assert sync(timed, until_caught_up=True).start_reason.startswith("timestamp")
    assert rows(tgt, db) == [(11, 11)]


def test_add_column_is_applied_other_ddl_halts_naming_statement_and_position(task):
    make, src, tgt, db = task
    rt = make(startup_mode="latest", schema_change_policy="apply_add_columns")
    sync(rt, until_caught_up=True)
    execute(src, "ALTER TABLE t ADD INDEX iv (v)",  # harmless
            "INSERT INTO t VALUES (5, 5)", "ALTER TABLE t ADD COLUMN note VARCHAR(20)",
            "INSERT INTO t VALUES (6, 6, 'six')")
    report = sync(rt, until_caught_up=True)
    assert report.schema_version == 1 and rows(tgt, db) == [(5, 5, None), (6, 6, "six")]
    assert rt.resumer.checkpoint().schema_version == 1 and rt.resumer.schemas(1) is not None

    execute(src, "INSERT INTO t VALUES (7, 7, 'seven')", "ALTER TABLE t DROP COLUMN note")
    with pytest.raises(SchemaChangeHalted, match=r"DROP COLUMN note") as err:
        sync(rt, until_caught_up=True)
    assert "mysql-bin" in str(err.value) and rows(tgt, db)[-1] == (7, 7, "seven")  # everything before it applied
    with pytest.raises(SchemaChangeHalted):  # and it stays halted: the checkpoint is before the statement
        sync(rt, until_caught_up=True)


def test_purged_binlog_fails_without_retry_and_names_the_way_out(task, servers):
    make, src, _, _ = task
    rt = make(startup_mode="position", start_position={"binlog_filename": "mysql-bin.999999",
                                                       "next_event_position": 4})
    with pytest.raises(PositionLost, match="plan --replan") as err:
        sync(rt, until_caught_up=False)
    assert "999999" in str(err.value) and f":{servers.mariadb.password}@" not in str(err.value)


def test_timestamp_mode_is_refused_for_postgresql(tmp_path, servers, unique_name):
    servers.postgres.create_database(unique_name)
    with pytest.raises(ConfigError, match="startup_mode timestamp is not possible for PostgreSQL"):
        config_for(tmp_path, servers, task_id="pgts", source="postgres", source_db=unique_name, tables=["public.t"],
                   target="postgres", target_db=unique_name,
                   pipeline={"startup_mode": "timestamp", "start_timestamp": "2026-01-01T00:00:00"})
