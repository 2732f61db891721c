"""Several targets without servers: what is not built for them yet is refused by name before anything connects
(never done to the first target only); a savepoint command's targets and lease; lanes; what the UI shows per
target."""
import pytest

from cdc_assets.config import parse_config
from cdc_assets.engine import reset, savepoints
from cdc_assets.core.positions import PgPosition
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.savepoint_values import Savepoint, SavepointReport
from cdc_assets.engine.task_lock import lease_holder
from cdc_assets.resumer.resumer import Checkpoint
from cdc_assets.errors import ConfigError

RAW = {
    "task_id": "shop",
    "source": {"db_type": "mysql", "url": "mysql://cdc:pw@127.0.0.1:9", "tables": ["shop.orders"]},
    "targets": [{"name": "a", "db_type": "postgres", "url": "postgresql://u:secret@127.0.0.1:9/a"},
                {"name": "b", "db_type": "postgres", "url": "postgresql://u:secret@127.0.0.1:9/b"}],
}


def test_reset_checkpoint_is_refused_with_several_targets(tmp_path):
    rt = TaskRuntime(parse_config({**RAW, "runtime": {"data_dir": str(tmp_path)}}, tmp_path))
    with pytest.raises(ConfigError) as err:
        reset.reset_checkpoint(rt, "latest", "test")
    assert str(err.value).startswith("a reset works on a task with one target") and "a, b" in str(err.value)
    assert "secret" not in str(err.value)


@pytest.mark.parametrize("command", [savepoints.create_on, savepoints.rollback_on, savepoints.delete_on])
def test_a_savepoint_command_naming_an_unknown_target_is_refused_before_anything_connects(tmp_path, command):
    rt = TaskRuntime(parse_config({**RAW, "runtime": {"data_dir": str(tmp_path)}}, tmp_path))
    with pytest.raises(ConfigError) as err:
        command(rt, "before_release", ["a", "c"])
    assert str(err.value).startswith("not a target of task shop: c") and "secret" not in str(err.value)
    assert rt.lanes[0].opened() == []  # no target was opened


def test_the_task_lease_is_held_once_for_every_lane(tmp_path):
    """A command holds the lease for all its targets: a lane asking again inside it is the same holder (an flock
    taken twice in one process would wait for itself)."""
    rt = TaskRuntime(parse_config({**RAW, "runtime": {"data_dir": str(tmp_path)}}, tmp_path))
    with savepoints.task_lease(rt, wait=0, doing="savepoint rollback x"):
        with savepoints.task_lease(rt.lanes[1], wait=0, doing="savepoint rollback x"):
            assert lease_holder(rt.config).startswith("savepoint rollback x")
    assert lease_holder(rt.config) is None


def test_a_report_names_its_target_with_several_and_says_when_a_delete_found_none():
    sp = Savepoint("s", 2, "2026-01-01 00:00:00", {**PgPosition(100).to_json(), "schema_version": 1}, {}, {},
                   ["shop.orders"], {})
    assert SavepointReport("s", sp, 0.5, "created").lines()[0].startswith("created savepoint s: epoch 2")
    rolled = SavepointReport("s", sp, 0.5, "rolled back to", "b", {"shop.orders": 3}, ["t"]).lines()
    assert rolled[0].startswith("target b: rolled back to savepoint s: epoch 2")
    assert rolled[1:] == ["target b: keys restored: shop.orders: 3",
                          "target b: later savepoints dropped (their state is gone): t"]
    assert SavepointReport("s", None, 0.0, "not on", "a").lines() == [
        "target a: no savepoint s (deleted there before): nothing to delete"]


def test_the_launch_key_of_several_targets_tells_a_rolled_back_target_apart():
    from cdc_assets.engine.lane_states import checkpoint_text

    at = PgPosition(100)
    assert checkpoint_text(None) == "-" and checkpoint_text(Checkpoint(at, 1, 5)) == "0/64"
    assert checkpoint_text(Checkpoint(at, 1, 5, rolled_back_to="s@2026-01-01 00:00:00")) == "0/64~s@2026-01-01 00:00:00"


def test_lanes_share_the_source_and_keep_their_own_positions(tmp_path):
    rt = TaskRuntime(parse_config({**RAW, "runtime": {"data_dir": str(tmp_path)}}, tmp_path))
    a, b = rt.lanes
    assert a is rt and b.task is rt.task and b.plans is rt.plans
    assert (a.position_key, b.position_key) == ("shop", "shop.b")
    assert (a.name, b.name) == ("a", "b") and b.lanes is rt.lanes


def test_a_target_reconnecting_leaves_the_other_targets_and_the_source_open(tmp_path):
    """A target that is down closes its own connections only: the others may be applying on their threads."""
    rt = TaskRuntime(parse_config({**RAW, "runtime": {"data_dir": str(tmp_path)}}, tmp_path))
    a, b = rt.lanes
    closed = []

    class Open:
        def __init__(self, name):
            self.name = name

        def close(self):
            closed.append(self.name)

    a._sink, b._sink, rt.task._source = Open("a"), Open("b"), Open("source")
    a.reconnect_target()
    assert closed == ["a"] and b.opened() == ["sink"] and a.opened() == []
    rt.reconnect()
    assert closed == ["a", "b", "source"] and b.opened() == []


def test_sync_and_snapshot_metadata_carry_every_target():
    """What the UI shows per target: the sync's observation of a table and a snapshot's materialization."""
    from cdc_assets.core.positions import PgPosition
    from cdc_assets.defs.assets import _metadata
    from cdc_assets.defs.incremental import _table_metadata
    from cdc_assets.engine.incremental import SyncReport
    from cdc_assets.engine.snapshot import SplitResult

    a = SyncReport(events=10, checkpoint=PgPosition(300), lag_bytes=0, per_table={"s.t": 10})
    b = SyncReport(events=4, checkpoint=PgPosition(100), lag_bytes=200, per_table={"s.t": 4})
    report = SyncReport(events=10, checkpoint=PgPosition(300), targets={"a": a, "b": b},
                        target_states={"b": "down since 0/64: connection refused"})
    meta = _table_metadata(report, "s.t")
    assert meta["target_a_events_applied"].value == 10 and meta["target_b_events_applied"].value == 4
    assert meta["target_b_lag_log_bytes"].value == 200 and meta["target_b_checkpoint"].value == "0/64"
    assert meta["target_a_state"].value == "applying" and meta["target_b_state"].value.startswith("down")

    results = [SplitResult("s.t:0", 5, 50, "0/1", "0/2", 1.0, targets={"a": "rows 5", "b": "failed: refused"}),
               SplitResult("s.t:1", 7, 70, "0/1", "0/2", 1.0, targets={"a": "rows 7", "b": "finished before"})]
    meta = _metadata(results)
    assert meta["target_a_rows"].value == 12 and meta["target_b_rows"].value == 0
    assert meta["target_b"].value == "0 splits committed, 1 finished before, 1 failed; failed: refused"


def test_a_savepoint_run_of_several_targets_lists_each_target_and_sums_what_it_restored():
    from cdc_assets.defs.savepoints import SavepointConfig, _summary

    assert SavepointConfig(name="s").targets == [] and SavepointConfig(name="s", targets=["b"]).targets == ["b"]
    sp = Savepoint("s", 1, "2026-01-01 00:00:00", {**PgPosition(100).to_json(), "schema_version": 1}, {}, {},
                   ["shop.orders"], {})
    reports = [SavepointReport("s", sp, 0.25, "rolled back to", "a", {"shop.orders": 3}),
               SavepointReport("s", sp, 0.5, "rolled back to", "b", {"shop.orders": 4}, ["later"])]
    lines, meta = _summary(reports, {"a": [sp], "b": [sp]}, several=True)
    assert lines == [f"a: {sp.line()}", f"b: {sp.line()}"]
    assert meta["keys_restored"].value == {"shop.orders": 7} and meta["dropped_later_savepoints"].value == "later"
    assert meta["targets"].value.count("rolled back to savepoint s") == 2 and meta["seconds"].value == 0.75
    one_lines, one = _summary(reports[:1], {"a": [sp]}, several=False)
    assert one_lines == [sp.line()] and "targets" not in one
