"""A followed log is committed as it comes: with checkpoint_interval_secs and checkpoint_after_events far out of
reach, a running sync applies a transaction as soon as the reader has nothing more to hand out
(pipeline.max_batch_delay_ms), not when the interval runs out."""
import threading
import time

import pytest

from cdc_assets.config import load_config
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets_tests.support import execute, fetch_rows, postgres_target, source_database, write_config

HOUR = 3600
WAIT_SECS = 60  # far below the interval: a batch that waited for it never arrives in time


@pytest.fixture
def task(servers, unique_name, tmp_path):
    target = f"{unique_name}_tgt"
    tgt = postgres_target(servers, target)
    with source_database(servers, "mysql", unique_name, ["CREATE TABLE t (id INT PRIMARY KEY, v INT)"]) as src:
        path = write_config(tmp_path, servers, task_id="follow", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target="postgres", target_db=target,
                            pipeline={"startup_mode": "latest", "checkpoint_interval_secs": HOUR,
                                      "checkpoint_after_events": 1_000_000})
        rt = TaskRuntime(load_config(path))
        rt.sink.ensure_table(rt.source.describe(rt.config.source.table_ids[0]))
        try:
            sync(rt, until_caught_up=True)  # the checkpoint: the followed run starts from it
            yield rt, src, tgt, unique_name
        finally:
            rt.close()
            tgt.close()


def test_a_followed_transaction_is_committed_without_waiting_out_the_interval(task):
    rt, src, tgt, db = task
    stop, reports = threading.Event(), []
    follower = threading.Thread(target=lambda: reports.append(sync(rt, stop=stop)))
    follower.start()
    try:
        execute(src, "INSERT INTO t VALUES (1, 1), (2, 2)", "UPDATE t SET v = 20 WHERE id = 2")
        deadline = time.monotonic() + WAIT_SECS
        while fetch_rows(tgt, f'"{db}".t', "id") != [(1, 1), (2, 20)]:
            assert follower.is_alive(), "the sync ended"
            assert time.monotonic() < deadline, f"not applied within {WAIT_SECS} s (checkpoint_interval_secs {HOUR})"
            time.sleep(0.05)
    finally:
        stop.set()
        follower.join(WAIT_SECS)
    [report] = reports
    assert report.ended == "stop requested" and report.events == 3
    assert report.checkpoint == rt.resumer.checkpoint().position
