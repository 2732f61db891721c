"""What verification decides before any split: whether a sync holds the task's lease (a probe that takes nothing),
and how a refused hold is counted and paced."""
import random

from cdc_assets.config import load_config
from cdc_assets.dbapi.errors import DEADLOCK, LOCK_WAIT_TIMEOUT
from cdc_assets.engine.task_lock import TaskBusy, lease_holder, task_lease
from cdc_assets.engine.verify_hold import BACKOFF_SECS, Refusals, pause
from cdc_assets_tests.unit.test_definitions_load import write_config


class Owner:
    """A lease's owner (a runtime, in the commands)."""


def test_the_lease_probe_names_a_running_sync_and_takes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CDC_SRC_PASSWORD", "pw")
    config = load_config(write_config(tmp_path, ["shop.orders"]))
    assert lease_holder(config) is None  # no lock file yet
    owner = Owner()
    with task_lease(config, "sync", owner=owner):
        assert lease_holder(config).startswith("sync (pid ")
        try:  # the probe left the lease to its holder: nobody else takes it meanwhile
            with task_lease(config, "reset", owner=Owner()):
                raise AssertionError("a second holder got the lease")
        except TaskBusy:
            pass
    assert lease_holder(config) is None
    with task_lease(config, "reset", owner=owner):  # and it is free to take once the sync ended
        assert lease_holder(config).startswith("reset")


def test_refusals_are_counted_by_kind_and_paced_within_bounds():
    refusals = Refusals([DEADLOCK, LOCK_WAIT_TIMEOUT, DEADLOCK])
    assert len(refusals) == 3 and str(refusals) == "2 deadlocks, 1 lock wait timeout"
    rng = random.Random(1)
    pauses = [pause(a, rng) for a in range(8)]
    first, longest = BACKOFF_SECS
    assert first / 2 <= pauses[0] <= first and all(p <= longest for p in pauses)
    assert pauses[-1] >= longest / 2 > pauses[0]
