"""What is not built for several targets yet is refused by name, before anything connects: never done to the
first target only."""
import pytest

from cdc_assets.config import parse_config
from cdc_assets.core.tables import TableId
from cdc_assets.engine import reset, savepoints, verify
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
    (lambda rt: verify.verify_table(rt, TableId("shop", "orders")), "verification"),
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
