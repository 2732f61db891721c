"""`cdc-assets reset` of a task with three targets (two PostgreSQL databases, one MariaDB database, each with its
own checkpoint) SIGKILLed after the second target's checkpoint moved: the first two are at the new position with
their records, the third at its old one, each consistent with its target; the same reset again finishes it, and
`--target` moves one target alone."""
import os
import signal
import subprocess

import pytest

from cdc_assets.config import load_config
from cdc_assets.engine.faults import ENV as CRASH_ENV
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.resumer.records import CDC_RESET
from cdc_assets_tests.support import cli_command, snapshot_all, three_target_source, three_targets

pytestmark = pytest.mark.crash
NAMES = ("pg_a", "pg_b", "maria")


def states(path) -> dict[str, tuple[str, int]]:
    """Per target: (checkpoint position, reset records), as a fresh process reads them."""
    rt = TaskRuntime(load_config(path))
    try:
        return {lane.name: (str(lane.resumer.checkpoint().position),
                            len([r for r in lane.resumer.records() if r.resumer_type == CDC_RESET]))
                for lane in rt.lanes}
    finally:
        rt.close()


def test_a_reset_of_three_targets_killed_midway_is_finished_by_running_it_again(tmp_path, servers, mariadb_target,
                                                                               unique_name, spark):
    db = unique_name
    src = three_target_source(servers, db)
    path = three_targets(tmp_path, servers, mariadb_target, db, f"rst_{db}")
    rt = TaskRuntime(load_config(path))
    rt.adopt_spark(spark)
    try:
        snapshot_all(rt)
        with src.cursor() as cur:
            cur.execute("UPDATE t SET v = v + 1 WHERE id = 1")
        sync(rt, until_caught_up=True)
    finally:
        rt.close()
    before = states(path)
    assert len({p for p, _ in before.values()}) == 1 and all(n == 0 for _, n in before.values())
    with src.cursor() as cur:  # the log moves past the checkpoints: a reset to latest skips this
        cur.execute("INSERT INTO t VALUES (31, 31)")

    killed = subprocess.run(cli_command(path, "reset", "--to", "latest"), capture_output=True, text=True,
                            env={**os.environ, CRASH_ENV: "reset.committed:2"}, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    midway = states(path)
    assert midway["maria"] == before["maria"], "the third target was not reached: its old checkpoint and no record"
    assert midway["pg_a"] == midway["pg_b"] and midway["pg_a"][1] == 1 and midway["pg_a"][0] != before["pg_a"][0]

    again = subprocess.run(cli_command(path, "reset", "--to", "latest"), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    done = states(path)
    assert {p for p, _ in done.values()} == {midway["pg_a"][0]}, done
    assert again.stdout.count("reset to latest") == 3 and again.stdout.count("nothing is skipped or replayed") == 2

    with src.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (32, 32)")
    one = subprocess.run(cli_command(path, "reset", "--to", "latest", "--target", "maria"), capture_output=True,
                         text=True, timeout=300)
    assert one.returncode == 0 and one.stdout.count("reset to latest") == 1, one.stdout + one.stderr
    last = states(path)
    assert last["pg_a"] == last["pg_b"] == done["pg_a"] and last["maria"][0] != done["maria"][0]
    assert last["maria"][1] == 2
    with src.cursor() as cur:
        cur.execute(f"DROP DATABASE `{db}`")
    src.close()
