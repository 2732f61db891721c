"""A followed log is committed as it comes: with checkpoint_interval_secs and checkpoint_after_events far out of
reach, a running sync applies a transaction as soon as the reader has nothing more to hand out
(pipeline.max_batch_delay_ms), not when the interval runs out."""
import threading
import time

import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets_tests.support import execute, fetch_rows, mysql_table_task

HOUR = 3600
WAIT_SECS = 60  # far below the interval: a batch that waited for it never arrives in time


@pytest.fixture
def task(servers, unique_name, tmp_path):
    pipeline = {"checkpoint_interval_secs": HOUR, "checkpoint_after_events": 1_000_000}
    with mysql_table_task(servers, unique_name, tmp_path, "follow", pipeline) as (_, rt, src, tgt):
        sync(rt, until_caught_up=True)  # the checkpoint: the followed run starts from it
        yield rt, src, tgt, unique_name


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
