"""The CLI's early session: when its runs may start, and what a failed warm-up does to the session."""
import threading

import pytest

from cdc_assets.engine import early_spark
from cdc_assets.spark import session as spark_session
from cdc_assets.spark import warm_up as spark_warm_up


class Runtime:
    """What EarlySpark asks of the task's runtime: whether the snapshot reads through Spark JDBC (its warm-up then
    checks the login) or pipes (the warm-up only starts the Python workers)."""
    reads_jdbc = False

    def __init__(self, config):
        self.snapshot_reads_jdbc, self.source = Runtime.reads_jdbc, object()

    def close(self):
        pass


@pytest.fixture
def started(monkeypatch):
    """A session just started, whose warm-up runs until `release` is set and then fails if `fail` is set."""
    state = {"release": threading.Event(), "fail": False, "stopped": [], "warming": threading.Event()}
    session = object()

    def warm_up(s, source, jdbc):
        state["warming"].set()
        assert state["release"].wait(10)
        if state["fail"]:
            raise RuntimeError("login refused")

    monkeypatch.setattr(spark_session, "build_session", lambda spark, app_name: (session, True))
    monkeypatch.setattr(spark_warm_up, "warm_up_source", warm_up)
    monkeypatch.setattr(spark_session, "stop_session", state["stopped"].append)
    monkeypatch.setattr(early_spark, "TaskRuntime", Runtime)
    monkeypatch.setattr(Runtime, "reads_jdbc", False)
    config = type("Config", (), {"spark": None, "task_id": "t"})()
    return state, session, config


def _ready_before_release(spark: early_spark.EarlySpark) -> bool:
    waiter = threading.Thread(target=spark.ready, daemon=True)
    waiter.start()
    waiter.join(timeout=2)
    return not waiter.is_alive()


@pytest.mark.parametrize("fail", [False, True])
def test_a_piped_snapshot_starts_its_runs_while_the_workers_start(started, fail):
    state, session, config = started
    state["fail"] = fail
    spark = early_spark.EarlySpark(config)
    assert state["warming"].wait(10)
    assert _ready_before_release(spark)
    state["release"].set()
    spark.wait()
    assert state["stopped"] == []  # a run may hold the session: its own jobs meet a broken worker and tell it


@pytest.mark.parametrize("fail", [False, True])
def test_a_jdbc_snapshot_waits_for_the_login_check(started, monkeypatch, fail):
    state, session, config = started
    monkeypatch.setattr(Runtime, "reads_jdbc", True)
    state["fail"] = fail
    spark = early_spark.EarlySpark(config)
    assert state["warming"].wait(10)
    assert not _ready_before_release(spark)
    state["release"].set()
    spark.ready()
    spark.wait()
    assert state["stopped"] == ([session] if fail else [])  # the run starts again and tells the refusal
