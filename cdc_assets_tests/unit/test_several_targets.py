"""Several targets without servers: what is not built for them yet is refused by name before anything connects
(never done to the first target only); lanes; what the UI shows per target."""
import pytest

from cdc_assets.config import parse_config
from cdc_assets.engine import reset, savepoints
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import ConfigError

RAW = {
    "task_id": "shop",
    "source": {"db_type": "mysql", "url": "mysql://cdc:pw@127.0.0.1:9", "tables": ["shop.orders"]},
    "targets": [{"name": "a", "db_type": "postgres", "url": "postgresql://u:secret@127.0.0.1:9/a"},
                {"name": "b", "db_type": "postgres", "url": "postgresql://u:secret@127.0.0.1:9/b"}],
}


@pytest.mark.parametrize("call, doing", [
    (lambda rt: savepoints.create(rt, "before_release"), "a savepoint"),
    (lambda rt: savepoints.rollback(rt, "before_release"), "a savepoint rollback"),
    (lambda rt: reset.reset_checkpoint(rt, "latest", "test"), "a reset"),
])
def test_refused_with_several_targets(tmp_path, call, doing):
    rt = TaskRuntime(parse_config({**RAW, "runtime": {"data_dir": str(tmp_path)}}, tmp_path))
    with pytest.raises(ConfigError) as err:
        call(rt)
    assert str(err.value).startswith(f"{doing} works on a task with one target") and "a, b" in str(err.value)
    assert "secret" not in str(err.value)


def test_lanes_share_the_source_and_keep_their_own_positions(tmp_path):
    rt = TaskRuntime(parse_config({**RAW, "runtime": {"data_dir": str(tmp_path)}}, tmp_path))
    a, b = rt.lanes
    assert a is rt and b.parent is rt and b.plans is rt.plans
    assert (a.position_key, b.position_key) == ("shop", "shop.b")
    assert (a.name, b.name) == ("a", "b") and b.lanes is rt.lanes


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
