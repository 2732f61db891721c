"""SIGKILL `cdc-assets savepoint rollback` at each of its crash points: the target is then exactly as before the
rollback or exactly as at the savepoint, never in between, and which one is decided by the target's commit. The
next `sync` finishes a rollback that committed (with positions in SQLite, writing the savepoint's checkpoint the
killed process did not) and the target then equals the source now."""
import os
import signal
import subprocess

import pytest

from cdc_assets.config import load_config
from cdc_assets.engine import savepoints, target_savepoints
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.faults import ENV as CRASH_ENV
from cdc_assets_tests.integration.test_savepoints import MYSQL_SEED, POSTGRES_SEED, changes, rows, run
from cdc_assets_tests.support import cli_command, snapshot_all, source_database, write_config

pytestmark = pytest.mark.crash

# (crash point, pass, the target's state after the kill)
POINTS = [
    ("savepoint.rollback_intent", 1, "before"),
    ("savepoint.rollback_slot", 1, "before"),
    ("savepoint.rollback_table", 1, "before"),  # inside the transaction, one table restored
    ("savepoint.rollback_before_commit", 1, "before"),
    ("savepoint.rollback_committed", 1, "after"),  # committed; positions outside the target not written yet
    ("savepoint.rollback_positions_written", 1, "after"),
]


def cli(path, *args: str, crash: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    env.update({CRASH_ENV: crash} if crash else {})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    return subprocess.run(cli_command(path, *args), env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("kind, resumer", [("mysql", "sqlite"), ("postgres", "from_target"), ("postgres", "sqlite")])
def test_a_killed_rollback_is_all_or_nothing_and_sync_converges(tmp_path, servers, spark, unique_name, pg_target,
                                                                kind, resumer):
    ns, target = unique_name, pg_target[1]
    seed = MYSQL_SEED if kind == "mysql" else [s.format(ns=ns) for s in POSTGRES_SEED]
    with source_database(servers, kind, ns, seed) as conn:
        path = write_config(tmp_path, servers, task_id=f"spc_{ns}", source=kind, source_db=ns,
                            tables=[f"{ns}.items", f"{ns}.pairs"], target="postgres", target_db=pg_target[0],
                            snapshot={"split_size": 200}, resumer={"resume_type": resumer})
        rt = TaskRuntime(load_config(path))
        rt.adopt_spark(spark)
        try:
            snapshot_all(rt)
            sync(rt, until_caught_up=True)
            for i, (point, nth, outcome) in enumerate(POINTS):
                name = f"sp{i}"
                savepoints.create_on(rt, name)
                at_savepoint = rows(conn, kind, ns)
                run(conn, changes(ns, 1000 * (i + 1)))
                sync(rt, until_caught_up=True)
                before = rows(target, "postgres", ns)
                assert before == rows(conn, kind, ns) != at_savepoint

                killed = cli(path, "savepoint", "rollback", name, crash=f"{point}:{nth}")
                assert killed.returncode == -signal.SIGKILL, f"{point} did not kill:\n{killed.stdout}{killed.stderr}"
                assert rows(target, "postgres", ns) == (before if outcome == "before" else at_savepoint), point

                done = cli(path, "sync", "--until-caught-up")
                assert done.returncode == 0, done.stdout + done.stderr
                assert rows(target, "postgres", ns) == rows(conn, kind, ns), point
                rt.reconnect()
                assert target_savepoints.recover(rt) is None  # nothing left to finish
        finally:
            rt.close()
