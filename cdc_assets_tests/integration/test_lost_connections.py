"""A sync that meets a server gone or its session ended retries with backoff (`pipeline.max_retries`), as
docs/concepts/log-phase.md says, wherever it meets it: a target whose sessions the server ended (a restart, a
failover, an administrator's pg_terminate_backend) between two batches, or a source down when the sync starts."""
import logging

import pytest
import yaml

from cdc_assets.config import load_config
from cdc_assets.dev.processes import free_port
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import UnreachableError
from cdc_assets_tests.support import execute, fetch_rows, mysql_table_task


def _end_sessions(tgt, database: str) -> int:
    with tgt.cursor() as cur:
        cur.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()", (database,))
        return cur.fetchone()[0]


def test_a_single_target_whose_sessions_ended_is_reconnected(servers, unique_name, tmp_path):
    with mysql_table_task(servers, unique_name, tmp_path, "lost", {"retry_backoff_secs": 0.1}) as (_, rt, src, tgt):
        sync(rt, until_caught_up=True)
        execute(src, "INSERT INTO t VALUES (1, 1)")
        sync(rt, until_caught_up=True)  # the target's connections are open, and stay so between syncs
        assert _end_sessions(tgt, f"{unique_name}_tgt") > 0
        execute(src, "INSERT INTO t VALUES (2, 2)", "UPDATE t SET v = 10 WHERE id = 1")
        report = sync(rt, until_caught_up=True)
        assert fetch_rows(tgt, f'"{unique_name}".t', "id") == [(1, 10), (2, 2)]
        assert report.retries >= 1


def test_a_sync_that_starts_while_the_source_is_down_retries_before_it_fails(servers, unique_name, tmp_path, caplog):
    pipeline = {"retry_backoff_secs": 0.1, "max_retries": 2}
    with mysql_table_task(servers, unique_name, tmp_path, "down", pipeline) as (path, rt, _, _):
        sync(rt, until_caught_up=True)
        raw = yaml.safe_load(path.read_text())  # the same task, its source where no server listens
        raw["source"]["url"] = raw["source"]["url"].replace(f":{servers.mariadb.port}", f":{free_port()}")
        path.write_text(yaml.safe_dump(raw))
        down = TaskRuntime(load_config(path))
        try:
            with caplog.at_level(logging.WARNING, logger="cdc_assets.incremental"), pytest.raises(UnreachableError):
                sync(down, until_caught_up=True)
        finally:
            down.close()
        assert caplog.text.count("reconnecting in") == 2
