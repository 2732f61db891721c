"""The task's replication slot on the private PostgreSQL: it is never confirmed past the checkpoint, whatever the
server's keepalives say while the reader holds transactions the target has not committed; an invalidated slot
stops plan and sync with the way out, and a re-plan makes a new one."""
import time
from contextlib import contextmanager

import pytest

from cdc_assets.core.positions import PgPosition
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import PositionLost
from cdc_assets.sources.postgres.slot import slot_state
from cdc_assets_tests.support import config_for, execute, fetch_rows, source_database

SEED = ["CREATE TABLE t (id INT PRIMARY KEY, v INT)"]


@pytest.fixture
def task(servers, unique_name, tmp_path):
    """(runtime, source connection, target connection); the task starts from the log end, no snapshot. The
    walsender asks for a reply after 4 s without one (a keepalive), the reader's server-side timeout."""
    target = f"{unique_name}_tgt"
    servers.postgres.create_database(target)
    tgt = servers.postgres.connect(target)
    with source_database(servers, "postgres", unique_name, SEED) as src:
        execute(src, f'ALTER DATABASE "{unique_name}" SET wal_sender_timeout = \'8s\'')
        config = config_for(tmp_path, servers, task_id=f"slot_{unique_name}", source="postgres",
                            source_db=unique_name, tables=["public.t"], target="postgres", target_db=target,
                            pipeline={"startup_mode": "latest", "checkpoint_interval_secs": 0.2,
                                      "checkpoint_after_events": 1})
        rt = TaskRuntime(config)
        try:
            yield rt, src, tgt
        finally:
            rt.close()
            tgt.close()


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


class SlowTarget:
    """Wraps the sink's apply. The first batch goes through; the next one takes `seconds`, comparing the slot's
    confirmed position with the commit ends of the transactions the target does not hold yet, then dies before
    committing (as a SIGKILL would: nothing after it is applied, checkpointed or acknowledged)."""

    def __init__(self, rt: TaskRuntime, src, tgt, ends: dict[int, PgPosition], seconds: float) -> None:
        self.rt, self.src, self.tgt, self.ends, self.seconds = rt, src, tgt, ends, seconds
        self.apply = rt.sink.apply_changes
        self.batches = 0
        self.confirmed_unapplied: set[str] = set()
        rt.sink.apply_changes = self

    def __call__(self, cursor, schema, changes) -> None:
        self.batches += 1
        if self.batches == 1:
            return self.apply(cursor, schema, changes)
        until = time.monotonic() + self.seconds
        while time.monotonic() < until:
            self.compare()
            time.sleep(0.2)
        raise Crash()

    def compare(self) -> None:
        """A transaction whose commit ends at or before the confirmed position is never sent again."""
        confirmed = slot_state(self.src, self.rt.log.slot).confirmed_flush_lsn
        held = {row[0] for row in fetch_rows(self.tgt, "public.t", "id")}
        self.confirmed_unapplied |= {f"row {i} (commit end {end}) before the slot's position {confirmed}"
                                     for i, end in self.ends.items() if i not in held and end.lsn <= confirmed.lsn}


class Crash(Exception):
    pass


def test_slot_never_confirms_a_transaction_the_target_has_not_committed(servers, unique_name, task):
    rt, src, tgt = task
    ensure_plans(rt)
    sync(rt, until_caught_up=True)  # a checkpoint at the log end
    long = servers.postgres.connect(unique_name)
    # A big transaction whose changes precede the commits of short ones, committed after them: once the reader
    # acknowledged the first short one, everything it receives of the big one lies before the acknowledged
    # position, and psycopg2 takes the next keepalive's position (past all short ones) as flushed. The
    # walsender sends keepalives while the reader is slower than it, after 4 s without a reply.
    execute(long, "BEGIN", "INSERT INTO t SELECT g, 0 FROM generate_series(1000, 200000) g")
    ends = {}
    for i in range(2, 8):
        execute(src, f"INSERT INTO t VALUES ({i}, {i})")
        ends[i] = rt.source.current_position()  # the commit's end: nothing else writes meanwhile
    execute(long, "COMMIT")
    long.close()
    slow = SlowTarget(rt, src, tgt, ends, seconds=8)

    try:
        sync(rt, until_caught_up=True)
    except Crash:
        pass
    slow.compare()

    assert slow.confirmed_unapplied == set()
    rt.sink.apply_changes = slow.apply
    while slot_state(src, rt.log.slot).active:  # the walsender notices the lost client once it sends again
        time.sleep(0.2)
    sync(rt, until_caught_up=True)  # the restart, from the checkpoint or the slot's position, whichever is later
    assert fetch_rows(tgt, "public.t", "id") == fetch_rows(src, "t", "id")
