"""A target whose checkpoint is ahead of the session's start (another target was reset back, or was down) skips
what it holds; a transaction handed out in parts that it holds already must not move its checkpoint back to that
transaction's end. Each checkpoint a target commits is a line of position.log, in order."""
import json

import pytest

from cdc_assets.config import load_config
from cdc_assets.core.positions import is_before, position_from_json
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.reset import reset_targets
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.resumer.logfile import POSITION_LOG
from cdc_assets_tests.support import snapshot_all, three_target_source, three_targets

pytestmark = pytest.mark.spark


def checkpoints_of(config, position_key: str) -> list:
    """Every checkpoint `position_key` committed, in order, as position.log has them."""
    out = []
    for line in (config.log_dir / POSITION_LOG).read_text(encoding="utf-8").splitlines():
        parts = line.split(" | ", 2)
        if len(parts) == 3 and parts[1] == "checkpoint_position":
            data = json.loads(parts[2])
            if data["task_id"] == position_key:
                out.append(position_from_json(data))
    return out


def test_a_target_ahead_never_checkpoints_a_transaction_in_parts_it_holds(tmp_path, servers, mariadb_target,
                                                                          unique_name, spark):
    db = unique_name
    src = three_target_source(servers, db)
    task = f"lap_{db}"
    path = three_targets(tmp_path, servers, mariadb_target, db, task, pipeline={"transaction_part_events": 3})
    config = load_config(path)
    rt = TaskRuntime(config)
    rt.adopt_spark(spark)
    try:
        snapshot_all(rt)
        sync(rt, until_caught_up=True)
        start = rt.resumer.checkpoint().position
        with src.cursor() as cur:  # one transaction of 20 row changes: handed out in parts of 3
            cur.execute("UPDATE t SET v = v + 1 WHERE id <= 20")
            cur.execute("UPDATE t SET v = v + 1 WHERE id = 30")
        sync(rt, until_caught_up=True)
        caught_up = rt.lanes[1].resumer.checkpoint().position
        reset_targets(rt, "position", "test", start, ["pg_a"])  # the session now starts before pg_b's checkpoint
        committed_before = len(checkpoints_of(config, f"{task}.pg_b"))
        with src.cursor() as cur:
            cur.execute("UPDATE t SET v = v + 1 WHERE id = 25")
        sync(rt, until_caught_up=True)
    finally:
        rt.close()
    later = checkpoints_of(config, f"{task}.pg_b")[committed_before:]
    assert later and not any(is_before(p, caught_up) for p in later), \
        f"pg_b checkpointed behind its own {caught_up}: {[str(p) for p in later]}"
