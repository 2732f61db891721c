"""What verification decides before any split: whether a sync holds the task's lease (a probe that takes nothing),
and how a refused hold is counted and paced."""
import fcntl
import os
import random
import threading

from cdc_assets.config import load_config
from cdc_assets.dbapi.errors import DEADLOCK, LOCK_WAIT_TIMEOUT
from cdc_assets.engine.task_lock import LOCK_FILE, TaskBusy, lease_holder, task_lease
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


def test_the_lease_probe_waits_for_the_name_a_holder_writes_just_after_taking_the_lease(tmp_path, monkeypatch):
    """A sync takes the lease, then writes its name into the lock file: a verification starting in between saw
    an empty file and called the holder "another process", blocked as if a reset held the checkpoint."""
    monkeypatch.setenv("CDC_SRC_PASSWORD", "pw")
    config = load_config(write_config(tmp_path, ["shop.orders"]))
    config.data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(config.data_dir / f"{config.task_id}.{LOCK_FILE}", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # taken, not named yet
        naming = threading.Timer(0.05, lambda: os.pwrite(fd, b"sync (pid 4242)", 0))
        naming.start()
        assert lease_holder(config) == "sync (pid 4242)"
        naming.join()
        os.ftruncate(fd, 0)  # a holder that never names itself: said so, after a moment
        assert lease_holder(config) == "another process"
    finally:
        os.close(fd)


def test_refusals_are_counted_by_kind_and_paced_within_bounds():
    refusals = Refusals([DEADLOCK, LOCK_WAIT_TIMEOUT, DEADLOCK])
    assert len(refusals) == 3 and str(refusals) == "2 deadlocks, 1 lock wait timeout"
    rng = random.Random(1)
    pauses = [pause(a, rng) for a in range(8)]
    first, longest = BACKOFF_SECS
    assert first / 2 <= pauses[0] <= first and all(p <= longest for p in pauses)
    assert pauses[-1] >= longest / 2 > pauses[0]
