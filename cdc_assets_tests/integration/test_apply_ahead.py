"""The log phase prepares the next batch (compaction, the sink's rendering) while the target applies the one before
it, and stays exact about what committed: a batch whose target work fails leaves the checkpoint at the batch before
it, and the batch prepared behind it is neither applied nor checkpointed."""
import threading

import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets_tests.support import execute, fetch_rows, mysql_table_task

ROWS = 100  # per source transaction, and per batch (checkpoint_after_events)
WAIT_SECS = 20


def _insert_transactions(src, count: int) -> None:
    for t in range(count):
        values = ", ".join(f"({t * ROWS + i}, {t})" for i in range(1, ROWS + 1))
        execute(src, f"INSERT INTO t VALUES {values}")


@pytest.fixture
def task(servers, unique_name, tmp_path):
    pipeline = {"checkpoint_after_events": ROWS, "checkpoint_interval_secs": 3600}
    with mysql_table_task(servers, unique_name, tmp_path, "ahead", pipeline) as (_, rt, src, tgt):
        sync(rt, until_caught_up=True)  # the checkpoint at the log's end: the runs below read what follows
        yield rt, src, tgt, unique_name


def test_the_next_batch_is_prepared_while_the_target_applies_the_one_before(task):
    rt, src, tgt, db = task
    _insert_transactions(src, 3)
    sink, prepared, seen_ahead = rt.sink, [], threading.Event()
    prepare, apply = sink.prepare_changes, sink.apply_changes

    def prepare_changes(schema, changes):
        prepared.append(threading.current_thread().name)
        if len(prepared) == 2:
            seen_ahead.set()
        prepare(schema, changes)

    def apply_changes(cursor, schema, changes):
        if len(prepared) == 1:  # the first batch: held until the second one was prepared beside it
            assert seen_ahead.wait(WAIT_SECS), "the second batch was not prepared while the first one was applied"
        apply(cursor, schema, changes)

    sink.prepare_changes, sink.apply_changes = prepare_changes, apply_changes
    report = sync(rt, until_caught_up=True)
    assert report.events == 3 * ROWS and report.batches == 3
    assert fetch_rows(tgt, f'"{db}".t', "id") == [(i, (i - 1) // ROWS) for i in range(1, 3 * ROWS + 1)]
    assert report.checkpoint == rt.resumer.checkpoint().position


def test_a_failed_batch_in_flight_leaves_the_checkpoint_at_the_batch_before_it(task):
    rt, src, tgt, db = task
    before = rt.resumer.checkpoint()
    _insert_transactions(src, 3)
    sink, prepared, applied, third = rt.sink, [], [], threading.Event()
    prepare, apply = sink.prepare_changes, sink.apply_changes

    def prepare_changes(schema, changes):
        prepared.append(changes)
        if len(prepared) == 3:
            third.set()
        prepare(schema, changes)

    def apply_changes(cursor, schema, changes):
        applied.append(changes)
        if len(applied) == 2:  # fails once the third batch is prepared behind it
            assert third.wait(WAIT_SECS), "the third batch was not prepared while the second one was applied"
            raise RuntimeError("the target refused the second batch")
        apply(cursor, schema, changes)

    sink.prepare_changes, sink.apply_changes = prepare_changes, apply_changes
    with pytest.raises(RuntimeError, match="refused the second batch"):
        sync(rt, until_caught_up=True)
    assert len(prepared) == 3 and len(applied) == 2  # the third was prepared behind the failing one, never applied
    assert fetch_rows(tgt, f'"{db}".t', "id") == [(i, 0) for i in range(1, ROWS + 1)]
    checkpoint = rt.resumer.checkpoint()
    assert checkpoint.events == before.events + ROWS and checkpoint.position != before.position

    sink.prepare_changes, sink.apply_changes = prepare, apply  # the target takes it again: the rest follows
    report = sync(rt, until_caught_up=True)
    assert report.events == 2 * ROWS
    assert fetch_rows(tgt, f'"{db}".t', "id") == [(i, (i - 1) // ROWS) for i in range(1, 3 * ROWS + 1)]
