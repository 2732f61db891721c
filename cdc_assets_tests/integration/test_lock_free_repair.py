"""A repair re-reads a split while the sync applies the log, holding nothing on the source (engine/repair.py).

The interleaving that makes such a re-read wrong is forced at the read's high watermark: the application changes
and deletes rows of the split, and the sync applies those changes to the target, before the repair commits. A
repair that wrote the whole read would put the old rows back over the sync's newer ones, and the sync would never
look at them again. Each test ends with the target compared with the source row by row, once the sync caught up.
"""
import threading
import time
from dataclasses import dataclass

import pytest

from cdc_assets.config import load_config
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets.engine.verify import FAILED, PASSED, verify_table
from cdc_assets.engine.verify_sync import wait_for
from cdc_assets_tests.support import snapshot_all, source_database, write_config

ROWS = 600
CORRUPT, LATE, GONE = 250, 260, 270  # all in the second split (201..400)
SEED = {
    "mysql": ["CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2))",
              f"INSERT INTO items SELECT seq, CONCAT('item ', seq), seq / 3 FROM seq_1_to_{ROWS}"],
    "postgres": ["CREATE SCHEMA {ns}", "CREATE TABLE {ns}.items (id INT PRIMARY KEY, name VARCHAR(40), price NUMERIC(10,2))",
                 f"INSERT INTO {{ns}}.items SELECT g, 'item ' || g, g / 3.0 FROM generate_series(1, {ROWS}) g"],
}
DIRECTIONS = [("mysql", "postgres"), ("postgres", "postgres"), ("postgres", "mysql")]


@dataclass
class Running:
    rt: TaskRuntime
    source: object  # autocommit connection to the source database
    target: object  # autocommit connection to the target
    table: object  # TableId
    source_table: str
    target_table: str


@pytest.fixture(params=DIRECTIONS, ids=lambda d: f"{d[0]}-{d[1]}")
def running(request, tmp_path, servers, unique_name, pg_target, spark):
    """A snapshotted task and a sync applying its log; no writer (each test writes what it needs)."""
    source, target = request.param
    seed = [s.replace("{ns}", unique_name) for s in SEED[source]]
    with source_database(servers, source, unique_name, seed) as src:
        target_db = pg_target[0] if target == "postgres" else unique_name
        path = write_config(tmp_path, servers, task_id=f"rep_{unique_name}", source=source, source_db=unique_name,
                            tables=[f"{unique_name}.items"], target=target, target_db=target_db,
                            snapshot={"split_size": 200},
                            pipeline={"checkpoint_interval_secs": 0.3, "checkpoint_after_events": 50})
        config = load_config(path)
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        snapshot_all(rt)
        stop = threading.Event()
        syncer = TaskRuntime(config)
        thread = threading.Thread(target=sync, args=(syncer,), kwargs={"stop": stop}, daemon=True)
        thread.start()
        tgt = pg_target[1] if target == "postgres" else servers.mariadb.connect(unique_name)
        src_table = f"`{unique_name}`.items" if source == "mysql" else f"{unique_name}.items"
        tgt_table = f'"{unique_name}".items' if target == "postgres" else f"`{unique_name}`.items"
        with src.cursor() as cur:  # a first change: the sync checkpoints only once it applied one
            cur.execute(f"UPDATE {src_table} SET name = 'first' WHERE id = 1")
        try:
            yield Running(rt, src, tgt, config.source.table_ids[0], src_table, tgt_table)
        finally:
            stop.set()
            thread.join(60)
            syncer.close()
            rt.close()
            if target == "mysql":
                tgt.close()


def rows(conn, table: str) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, name, price FROM {table} ORDER BY id")
        return [tuple(r) for r in cur.fetchall()]


def caught_up(r: Running) -> None:
    reached, at = wait_for(r.rt, r.rt.source.current_position(), 60)
    assert reached, f"the sync did not catch up: its checkpoint is at {at}"


def fail_verification(r: Running) -> str:
    """Corrupt one target row of the second split; verification records the split failed."""
    bad = f"{r.table}:0001"
    with r.target.cursor() as cur:
        cur.execute(f"UPDATE {r.target_table} SET name = 'corrupted' WHERE id = {CORRUPT}")
    caught_up(r)
    checks = {c.split_id: c.status for c in verify_table(r.rt, r.table, wait_secs=60)}
    assert checks[bad] == FAILED, checks
    return bad


def test_rows_the_log_changed_during_the_repair_stay_as_the_sync_made_them(running):
    r = running
    bad = fail_verification(r)

    def change_after_the_read(split_ids):
        # After the repair's read: its staged rows are now the old ones. The sync applies the changes before the
        # repair commits (the commit waits for nothing on the source and the sync is not held back yet).
        with r.source.cursor() as cur:
            cur.execute(f"UPDATE {r.source_table} SET name = 'late' WHERE id = {LATE}")
            cur.execute(f"DELETE FROM {r.source_table} WHERE id = {GONE}")
        caught_up(r)

    r.rt.hooks.after_high = change_after_the_read
    [result] = snapshot_splits(r.rt, r.table, [bad])
    r.rt.hooks.after_high = None

    caught_up(r)
    source, target = rows(r.source, r.source_table), rows(r.target, r.target_table)
    assert len(source) == ROWS - 1
    assert target == source, [(s, t) for s, t in zip(source, target) if s != t][:5]
    assert not result.skipped and result.kept is not None and result.kept >= 1, result
    assert all(c.status == PASSED for c in verify_table(r.rt, r.table, wait_secs=60))


def test_a_writer_holding_rows_of_the_split_does_not_hold_up_the_repair(running):
    r = running
    bad = fail_verification(r)
    # An application transaction that keeps rows of the split locked all through the repair: the repair must
    # neither wait for it nor make it wait (a hold on the source would do both).
    blocker = r.rt.source.url
    from cdc_assets.dbapi.connect import connect
    app = connect(blocker, autocommit=True)
    try:
        with app.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"UPDATE {r.source_table} SET name = 'open' WHERE id = {LATE}")
            started = time.monotonic()
            [result] = snapshot_splits(r.rt, r.table, [bad])
            took = time.monotonic() - started
            cur.execute(f"UPDATE {r.source_table} SET name = 'open too' WHERE id = {LATE + 1}")
            cur.execute("COMMIT")
    finally:
        app.close()
    assert not result.skipped and result.kept is not None, result
    print(f"repair with a row of the split locked by the application: {took:.1f} s")
    caught_up(r)
    assert rows(r.target, r.target_table) == rows(r.source, r.source_table)
    assert all(c.status == PASSED for c in verify_table(r.rt, r.table, wait_secs=60))
