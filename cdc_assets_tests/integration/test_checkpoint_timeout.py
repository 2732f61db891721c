"""pipeline.checkpoint_timeout_secs against a really slow target: a statement trigger that sleeps in pg_sleep on
the target table makes each batch's target transaction outlast the timeout; the sync report, the log and the
incremental run's metadata on a real Dagster instance say so with the figures, and a fast batch says nothing."""
import logging

import dagster as dg
import pytest

from cdc_assets.config import load_config
from cdc_assets.defs.build import build_definitions
from cdc_assets.defs.incremental import job_name
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets_tests.support import (execute, fetch_rows, mysql_table_task, postgres_target, source_database,
                                     write_config)

SLEEP_SECS = 1.5
TIMEOUT_SECS = 1.0


@pytest.fixture
def task(servers, unique_name, tmp_path):
    # One sync's transactions share a batch: the reader never keeps them waiting a minute.
    pipeline = {"checkpoint_timeout_secs": TIMEOUT_SECS, "max_batch_delay_ms": 60_000}
    with mysql_table_task(servers, unique_name, tmp_path, "slow", pipeline) as (path, rt, src, tgt):
        yield path, rt, src, tgt, unique_name


def slow_down(tgt, db: str) -> None:
    execute(tgt, f"CREATE FUNCTION \"{db}\".slow() RETURNS trigger LANGUAGE plpgsql AS "
                 f"$$ BEGIN PERFORM pg_sleep({SLEEP_SECS}); RETURN NULL; END $$",
            f'CREATE TRIGGER slow AFTER INSERT ON "{db}".t FOR EACH STATEMENT EXECUTE FUNCTION "{db}".slow()')


def test_a_batch_over_the_timeout_is_reported_with_its_figures(task, caplog):
    _, rt, src, tgt, db = task
    sync(rt, until_caught_up=True)
    execute(src, "INSERT INTO t VALUES (1, 1), (2, 2)")
    fast = sync(rt, until_caught_up=True)
    assert fast.events == 2 and fast.slow_batches == 0 and fast.slowest is None

    slow_down(tgt, db)
    execute(src, "INSERT INTO t VALUES (3, 3), (4, 4), (5, 5)", "UPDATE t SET v = 10 WHERE id = 1")
    with caplog.at_level(logging.WARNING, logger="cdc_assets.incremental"):
        report = sync(rt, until_caught_up=True)
    assert fetch_rows(tgt, f'"{db}".t', "id") == [(1, 10), (2, 2), (3, 3), (4, 4), (5, 5)]
    assert report.slow_batches == 1
    slowest = report.slowest
    assert slowest.events == 4 and slowest.rows == 4 and slowest.transactions == 2
    assert SLEEP_SECS <= slowest.target_secs < SLEEP_SECS + 5
    assert slowest.position == str(report.checkpoint)
    [warning] = [r.getMessage() for r in caplog.records if "checkpoint_timeout_secs" in r.getMessage()]
    assert "checkpoint_after_events" in warning and "4 rows written" in warning
    assert any("1 batches over checkpoint_timeout_secs" in line for line in report.lines())


def test_the_incremental_run_shows_the_slow_batch_in_its_metadata(task):
    path, rt, src, tgt, db = task
    sync(rt, until_caught_up=True)
    slow_down(tgt, db)
    execute(src, "INSERT INTO t VALUES (7, 7)")
    config = load_config(path)
    defs = build_definitions(config, str(path))
    with dg.instance_for_test() as instance:
        result = defs.resolve_job_def(job_name(config.task_id)).execute_in_process(instance=instance)
        assert result.success
        [output] = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
        metadata = output.event_specific_data.metadata
        assert metadata["slow_batches"].value == 1 and metadata["slowest_batch_rows"].value == 1
        assert metadata["slowest_batch_target_seconds"].value >= SLEEP_SECS
        assert "checkpoint_after_events" in metadata["slowest_batch"].value
        warnings = [r for r in instance.all_logs(result.run_id)
                    if r.level == logging.WARNING and "checkpoint_timeout_secs" in r.user_message]
        assert len(warnings) == 1


def test_a_transaction_in_parts_counts_the_target_time_of_every_part(servers, unique_name, tmp_path):
    target = f"{unique_name}_tgt"
    tgt = postgres_target(servers, target)
    with source_database(servers, "mysql", unique_name, ["CREATE TABLE t (id INT PRIMARY KEY, v INT)"]) as src:
        path = write_config(tmp_path, servers, task_id="slow_parts", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target="postgres", target_db=target,
                            pipeline={"startup_mode": "latest", "checkpoint_timeout_secs": TIMEOUT_SECS,
                                      "transaction_part_events": 2})
        rt = TaskRuntime(load_config(path))
        try:
            rt.sink.ensure_table(rt.source.describe(rt.config.source.table_ids[0]))
            sync(rt, until_caught_up=True)
            slow_down(tgt, unique_name)
            execute(src, "INSERT INTO t VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)")  # parts of 2, 2, then 1
            report = sync(rt, until_caught_up=True)
            assert report.slow_batches == 1 and report.slowest.events == 5 and report.slowest.transactions == 1
            assert report.slowest.target_secs >= 3 * SLEEP_SECS  # each part's INSERT fired the trigger
        finally:
            rt.close()
            tgt.close()
