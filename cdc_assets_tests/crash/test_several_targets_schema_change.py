"""A column added on the source under `apply_add_columns`, followed by a task with three targets: every target
gets the column and its values, also when the sync is SIGKILLed after one target's lane checkpointed the change
and before the others met it. The first lane to follow once restarted the session before the others saw the
change, and the restarted session read the log with that lane's new definitions: the others never met the change
and left the column's values out, without a stop (found by the adversary, postgres-three --schema-changes)."""
from __future__ import annotations

import os

import pytest

from cdc_assets.config import load_config
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.sources.postgres.slot import drop_slot, slot_name
from cdc_assets_tests.crash.test_incremental_crash import cli, killed_by_itself, ok
from cdc_assets_tests.support import execute, fetch_rows, snapshot_all, source_database, write_config

pytestmark = [pytest.mark.crash, pytest.mark.spark]

WANT = [(1, 1, 7), (2, 2, 20), (3, 3, 3)]


@pytest.mark.parametrize("source, killed", [("postgres", False), ("mysql", False), ("postgres", True)])
def test_every_target_follows_an_added_column(tmp_path, servers, mariadb_target, spark, unique_name, source, killed):
    ns = unique_name
    seed = [] if source == "mysql" else [f"CREATE SCHEMA {ns}"]
    seed += [f"CREATE TABLE {ns}.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO {ns}.t VALUES (1, 1)"]
    for name in ("a", "b"):
        servers.postgres.create_database(f"{ns}_{name}")
    targets = [{"name": "pg_a", "db_type": "postgres", "url": servers.postgres.url(f"{ns}_a")},
               {"name": "pg_b", "db_type": "postgres", "url": servers.postgres.url(f"{ns}_b")},
               {"name": "maria", "db_type": "mysql", "url": mariadb_target.url()}]
    with source_database(servers, source, unique_name, seed) as src:
        path = write_config(tmp_path, servers, task_id=unique_name, source=source, source_db=unique_name,
                            tables=[f"{ns}.t"], targets=targets,
                            pipeline={"schema_change_policy": "apply_add_columns", "checkpoint_interval_secs": 0.5})
        env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
        try:
            rt = TaskRuntime(load_config(path))
            rt.adopt_spark(spark)
            try:
                snapshot_all(rt)
                sync(rt, until_caught_up=True)
            finally:
                rt.close()
            execute(src, f"ALTER TABLE {ns}.t ADD COLUMN w INT DEFAULT 7", f"INSERT INTO {ns}.t VALUES (2, 2, 20)",
                    f"INSERT INTO {ns}.t VALUES (3, 3, 3)")
            if killed:
                killed_by_itself(cli(path, env, "sync", "--until-caught-up", crash="incremental.schema_followed"))
                versions = _versions(path)
                assert versions[0] > versions[1] == versions[2]  # pg_a followed, the others not
            ok(cli(path, env, "sync", "--until-caught-up"))
        finally:
            if source == "postgres":
                drop_slot(src, slot_name(unique_name))
    for name, conn, table in _targets(servers, mariadb_target, ns):
        try:
            assert fetch_rows(conn, table, "id") == WANT, name
        finally:
            conn.close()


def _versions(path) -> list[int]:
    """Each target's checkpoint's schema version, in the task's order of targets."""
    rt = TaskRuntime(load_config(path))
    try:
        return [lane.resumer.checkpoint().schema_version for lane in rt.lanes]
    finally:
        rt.close()


def _targets(servers, mariadb_target, ns: str):
    return [("pg_a", servers.postgres.connect(f"{ns}_a"), f'"{ns}".t'),
            ("pg_b", servers.postgres.connect(f"{ns}_b"), f'"{ns}".t'),
            ("maria", mariadb_target.connect(), f"`{ns}`.t")]
