"""SIGKILL `cdc-assets reset` at each of its crash points: the checkpoint is the old one or the new one, never
anything else, and the reset's record exists exactly when the new checkpoint does. With `from_target` the record
and the checkpoint are two statements of one target transaction, killed between them too."""
import json
import os
import signal
import subprocess

import pytest

from cdc_assets.config import load_config
from cdc_assets.engine.faults import ENV as CRASH_ENV
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.resumer.records import CDC_RESET
from cdc_assets_tests.support import cli_command, execute, fetch_rows, postgres_target, source_database, write_config

pytestmark = pytest.mark.crash

CASES = [("from_target", "reset.before_write", False), ("from_target", "reset.record_written", False),
         ("from_target", "reset.committed", True), ("sqlite", "reset.before_write", False),
         ("sqlite", "reset.committed", True)]


def state(path):
    """(checkpoint position, reset records) as a fresh process would read them."""
    rt = TaskRuntime(load_config(path))
    try:
        return rt.resumer.checkpoint().position, [r for r in rt.resumer.records() if r.resumer_type == CDC_RESET]
    finally:
        rt.close()


@pytest.mark.parametrize("resume_type,point,moved", CASES, ids=[f"{r}-{p}" for r, p, _ in CASES])
def test_a_reset_killed_leaves_the_old_or_the_new_checkpoint(tmp_path, servers, unique_name, resume_type, point, moved):
    target = f"{unique_name}_tgt"
    tgt = postgres_target(servers, target)
    with source_database(servers, "mysql", unique_name, ["CREATE TABLE t (id INT PRIMARY KEY, v INT)"]) as src:
        path = write_config(tmp_path, servers, task_id="reset_crash", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target="postgres", target_db=target,
                            resumer={"resume_type": resume_type}, pipeline={"startup_mode": "latest"})
        rt = TaskRuntime(load_config(path))
        rt.sink.ensure_table(rt.source.describe(rt.config.source.table_ids[0]))
        sync(rt, until_caught_up=True)
        old = rt.resumer.checkpoint().position
        execute(src, "INSERT INTO t VALUES (1, 1), (2, 2)")  # skipped by the reset, if it happens
        end = rt.source.current_position()
        rt.close()

        killed = subprocess.run(cli_command(path, "reset", "--to", "latest"), env={**os.environ, CRASH_ENV: point},
                                capture_output=True, text=True, timeout=300)
        assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-2000:]
        position, records = state(path)
        assert position == (end if moved else old)
        assert len(records) == (1 if moved else 0)
        if moved:
            assert records[0].position_data["to_position"] == end.to_json()

        # Whatever the crash left, the task goes on from it: the skipped rows are in the target exactly when the
        # reset did not happen.
        rt = TaskRuntime(load_config(path))
        try:
            sync(rt, until_caught_up=True)
        finally:
            rt.close()
        assert fetch_rows(tgt, f'"{unique_name}".t', "id") == ([] if moved else [(1, 1), (2, 2)])
        if resume_type != "from_target":
            return
        with tgt.cursor() as cur:  # the position table in the target holds no half of the transaction
            cur.execute("SELECT resumer_type, position_data FROM cdc_assets_meta.task_position WHERE task_id = %s "
                        "AND resumer_type IN ('CdcDoing', %s)", ("reset_crash", CDC_RESET))
            kinds = {kind: json.loads(data) for kind, data in cur.fetchall()}
        assert (CDC_RESET in kinds) == moved
    tgt.close()
