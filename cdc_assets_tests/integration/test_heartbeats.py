"""Heartbeats: a captured table that stays idle on a busy server holds neither the log nor the lag figure. A writer
commits only to tables the task does not capture (in its database and in another one) for several seconds; the
task's checkpoint, and for PostgreSQL the slot's confirmed_flush_lsn, follow the log end meanwhile."""
import threading
import time

import pytest

from cdc_assets.core.positions import is_before
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.sources.postgres.slot import slot_state
from cdc_assets_tests.support import config_for, execute, source_database

SEED = ["CREATE TABLE t (id INT PRIMARY KEY, v INT)", "CREATE TABLE busy (id INT PRIMARY KEY, v INT)"]
WRITE_SECS = 8.0
CATCH_UP_SECS = 10.0  # checkpoint_interval_secs + the reader's 1 s Idle + margin for a loaded machine


class Writer(threading.Thread):
    """Commits single-row inserts to uncaptured tables until stopped (pgbench-like, one client)."""

    def __init__(self, conns):
        super().__init__(daemon=True)
        self.conns, self.stop, self.commits = conns, threading.Event(), 0

    def run(self):
        while not self.stop.is_set():
            for conn in self.conns:
                execute(conn, f"INSERT INTO busy VALUES ({self.commits}, {self.commits})")
            self.commits += 1
            time.sleep(0.01)


@pytest.mark.parametrize("kind,where", [("postgres", "both"), ("postgres", "other database"), ("mysql", "both")])
def test_writes_only_to_uncaptured_tables_move_the_checkpoint_and_the_slot(kind, where, servers, unique_name,
                                                                          tmp_path):
    """`where`: the writer commits to an uncaptured table of the task's database and of another one ("both"), or
    only in another database: the slot's database then writes no WAL at all."""
    target, other = f"{unique_name}_tgt", f"{unique_name}_oth"
    servers.postgres.create_database(target)
    with source_database(servers, kind, unique_name, SEED) as src, \
            source_database(servers, kind, other, SEED[1:]) as elsewhere:
        config = config_for(tmp_path, servers, task_id=f"hb_{unique_name}", source=kind, source_db=unique_name,
                            tables=[f"{unique_name}.t" if kind == "mysql" else "public.t"], target="postgres",
                            target_db=target, pipeline={"startup_mode": "latest", "checkpoint_interval_secs": 0.5})
        rt, observer = TaskRuntime(config), TaskRuntime(config)
        writer = Writer([src, elsewhere] if where == "both" else [elsewhere])
        stop = threading.Event()
        try:
            rt.log.prepare(config.source.table_ids)
            sync(rt, until_caught_up=True)
            start = observer.resumer.checkpoint().position
            reports = []
            syncing = threading.Thread(target=lambda: reports.append(sync(rt, stop=stop)), daemon=True)
            syncing.start()
            writer.start()
            time.sleep(WRITE_SECS)
            end = observer.source.current_position()  # the log end while the writer still writes
            assert is_before(start, end)
            deadline = time.monotonic() + CATCH_UP_SECS
            while time.monotonic() < deadline and is_before(observer.resumer.checkpoint().position, end):
                time.sleep(0.2)
            checkpoint = observer.resumer.checkpoint().position
            assert not is_before(checkpoint, end), f"checkpoint {checkpoint} stayed behind the log end {end}"
            if kind == "postgres":
                confirmed = slot_state(src, rt.log.slot).confirmed_flush_lsn
                assert confirmed.lsn >= end.lsn, f"slot confirmed {confirmed}, behind {end}: it holds the WAL"
            writer.stop.set()
            writer.join()
            stop.set()
            syncing.join(30)
            [report] = reports
            assert report.events == 0 and writer.commits > 100
            assert report.lag_seconds == 0.0
            assert report.lag_bytes is not None and report.lag_bytes < observer.log.distance(start, end) / 2
        finally:
            writer.stop.set()
            stop.set()
            rt.close()
            observer.close()
