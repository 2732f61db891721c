"""The task's replication slot on the private PostgreSQL: an invalidated slot stops plan and sync with the way out,
and a re-plan makes a new one."""
from contextlib import contextmanager

import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import PositionLost
from cdc_assets.sources.postgres.replication import slot_state
from cdc_assets_tests.support import config_for, fetch_rows, source_database

SEED = ["CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)"]


@pytest.fixture
def task(servers, unique_name, tmp_path):
    """(runtime, source connection, target connection); the task starts from the log end, no snapshot."""
    target = f"{unique_name}_tgt"
    servers.postgres.create_database(target)
    tgt = servers.postgres.connect(target)
    with source_database(servers, "postgres", unique_name, SEED) as src:
        config = config_for(tmp_path, servers, task_id=f"slot_{unique_name}", source="postgres",
                            source_db=unique_name, tables=["public.t"], target="postgres", target_db=target,
                            pipeline={"startup_mode": "latest", "checkpoint_interval_secs": 0.2})
        rt = TaskRuntime(config)
        try:
            yield rt, src, tgt
        finally:
            rt.close()
            tgt.close()


def execute(conn, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


@contextmanager
def slot_wal_limit(conn, size: str):
    """max_slot_wal_keep_size on the whole server (this test run's own), restored afterwards."""
    execute(conn, f"ALTER SYSTEM SET max_slot_wal_keep_size = '{size}'", "SELECT pg_reload_conf()")
    try:
        yield
    finally:
        execute(conn, "ALTER SYSTEM RESET max_slot_wal_keep_size", "SELECT pg_reload_conf()")


def invalidate(conn, slot: str) -> None:
    """Leave more WAL behind the slot than the server may keep for it, then let a checkpoint drop it."""
    with slot_wal_limit(conn, "1MB"):
        for _ in range(3):
            execute(conn, "INSERT INTO t SELECT g, 0 FROM generate_series(100, 2000) g ON CONFLICT (id) DO NOTHING",
                    "SELECT pg_switch_wal()")
        execute(conn, "CHECKPOINT")
        assert slot_state(conn, slot).wal_status == "lost"


def test_invalidated_slot_stops_plan_and_sync_and_a_replan_makes_a_new_slot(task):
    rt, src, tgt = task
    ensure_plans(rt)
    execute(src, "INSERT INTO t VALUES (2, 2)")
    sync(rt, until_caught_up=True)
    slot = rt.log.slot

    invalidate(src, slot)

    for attempt in (lambda: ensure_plans(rt), lambda: sync(rt, until_caught_up=True)):
        with pytest.raises(PositionLost, match=rf"replication slot {slot} .*invalidated.*plan --replan"):
            attempt()

    ensure_plans(rt, replan=True)
    state = slot_state(src, slot)
    assert state.wal_status != "lost" and state.restart_lsn is not None
    execute(src, "INSERT INTO t VALUES (3, 3)")
    sync(rt, until_caught_up=True)  # starts at the log end again (the replan cleared the checkpoint)
    execute(src, "UPDATE t SET v = 30 WHERE id = 3")
    sync(rt, until_caught_up=True)
    assert fetch_rows(tgt, "public.t", "id")[-1] == (3, 30)
