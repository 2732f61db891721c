"""Log headroom on the real servers: the asset check on a real Dagster instance, the launcher's skip reasons and
`cdc-assets positions` say ok, then warn before the position is lost, then lost with the way out."""
import json
import subprocess
import time

import dagster as dg
import pytest

from cdc_assets.config import load_config
from cdc_assets.core.headroom import Level
from cdc_assets.defs.build import build_definitions
from cdc_assets.defs.names import asset_key
from cdc_assets.engine.headroom import task_headroom
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import PositionLost
from cdc_assets_tests.integration.test_pg_slot import invalidate, slot_wal_limit
from cdc_assets_tests.support import cli_command, execute, source_database, write_config

SEED = ["CREATE TABLE t (id INT PRIMARY KEY, v INT)"]


def make_task(tmp_path, servers, kind, db, target):
    servers.postgres.create_database(target)
    path = write_config(tmp_path, servers, task_id=f"hr_{db}", source=kind, source_db=db,
                        tables=[f"{db}.t" if kind == "mysql" else "public.t"], target="postgres", target_db=target,
                        pipeline={"startup_mode": "latest"})
    rt = TaskRuntime(load_config(path))
    rt.sink.ensure_table(rt.source.describe(rt.config.source.table_ids[0]))
    return path, rt


class Views:
    """The three places a person reads headroom: check on a real instance, launcher tick, CLI."""

    def __init__(self, path, instance):
        self.path, self.instance = path, instance
        self.config = load_config(path)
        self.defs = build_definitions(self.config, str(path))

    def check(self) -> dg.AssetCheckEvaluation:
        job = self.defs.resolve_job_def(f"{self.config.task_id}_headroom")
        result = job.execute_in_process(instance=self.instance)
        [evaluation] = result.get_asset_check_evaluations()
        assert evaluation.asset_key == asset_key(self.config.task_id, self.config.source.table_ids[0])
        return evaluation

    def launcher(self):
        sensor = self.defs.get_sensor_def(f"{self.config.task_id}_incremental_launcher")
        return sensor(dg.build_sensor_context(instance=self.instance, definitions=self.defs))

    def tick(self) -> str:
        skipped = self.launcher()
        assert isinstance(skipped, dg.SkipReason), skipped
        return skipped.skip_message

    def cli(self) -> dict:
        out = subprocess.run(cli_command(self.path, "positions"), capture_output=True, text=True, check=True,
                             env={"DAGSTER_HOME": str(self.path.parent / "dh"), "PATH": "/usr/bin:/bin"})
        return json.loads(out.stdout.strip().splitlines()[-1])


def test_postgres_slot_headroom_ok_then_warn_then_lost(tmp_path, servers, unique_name):
    with source_database(servers, "postgres", unique_name, SEED) as src, dg.instance_for_test() as instance:
        path, rt = make_task(tmp_path, servers, "postgres", unique_name, f"{unique_name}_tgt")
        try:
            rt.log.prepare(rt.config.source.table_ids)
            sync(rt, until_caught_up=True)
            views = Views(path, instance)
            ok = views.check()
            assert ok.passed and "slot" in ok.description and "no max_slot_wal_keep_size" in ok.description
            assert "caught up" in views.tick() and "headroom ok" in views.tick()

            with slot_wal_limit(src, "64MB"):  # the slot holds more than three quarters of it: warn
                execute(src, "SELECT pg_switch_wal()", "CREATE TABLE filler (b text)",
                        "INSERT INTO filler SELECT repeat(md5(g::text), 32) FROM generate_series(1, 55000) g")
                headroom = task_headroom(rt)
                assert headroom.level is Level.WARN, headroom
                warned = views.check()
                assert not warned.passed and warned.severity is dg.AssetCheckSeverity.WARN
                assert "max_slot_wal_keep_size" in warned.description
                assert warned.metadata["retained_wal_bytes"].value > 48 << 20
                assert views.cli()["headroom"] == "warn"

            invalidate(src, rt.log.slot)
            lost = views.check()
            assert not lost.passed and lost.severity is dg.AssetCheckSeverity.ERROR, lost.description
            assert "invalidated" in lost.description and "plan --replan" in lost.description
            assert views.tick().startswith("not launching: headroom lost") and "plan --replan" in views.tick()
            assert views.cli()["headroom"] == "lost"
            with pytest.raises(PositionLost):  # the reader agrees: the slot is gone
                sync(rt, until_caught_up=True)
        finally:
            rt.close()


@pytest.fixture
def binlog_expiry(servers):
    conn = servers.mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.binlog_expire_logs_seconds")
        before = cur.fetchone()[0]

    def set_to(seconds: int) -> None:
        execute(conn, f"SET GLOBAL binlog_expire_logs_seconds = {seconds}")
    yield set_to, conn
    set_to(before)
    conn.close()


def test_mysql_binlog_headroom_ok_then_warn_then_lost(tmp_path, servers, unique_name, binlog_expiry):
    set_expiry, admin = binlog_expiry
    with source_database(servers, "mysql", unique_name, SEED) as src, dg.instance_for_test() as instance:
        path, rt = make_task(tmp_path, servers, "mysql", unique_name, f"{unique_name}_tgt")
        try:
            set_expiry(3600)
            execute(src, "INSERT INTO t VALUES (1, 1)")
            sync(rt, until_caught_up=True)
            needed = rt.resumer.checkpoint().position
            views = Views(path, instance)
            ok = views.check()
            assert ok.passed and needed.file in ok.description and "left of a 1.0 hours retention" in ok.description
            assert "headroom ok" in views.tick()

            set_expiry(12)  # the checkpoint's file closes now; with 3 s of 12 left it warns (a quarter)
            execute(admin, "FLUSH BINARY LOGS")
            time.sleep(9.5)
            warned = views.check()
            assert not warned.passed and warned.severity is dg.AssetCheckSeverity.WARN, warned.description
            assert f"{needed.file}, 1 of" in warned.description and "binlog_expire_logs_seconds" in warned.description
            assert 0 <= warned.metadata["seconds_left"].value <= 3
            # The log end moved to the next file: the launcher starts the run that moves the checkpoint on.
            assert isinstance(views.launcher(), dg.RunRequest)

            def purge_all_but_the_current_file():
                with admin.cursor() as cur:
                    cur.execute("SHOW BINARY LOGS")
                    current = cur.fetchall()[-1][0]
                    for _ in range(600):  # PURGE skips a file still in use by a dump thread that has not ended
                        cur.execute(f"PURGE BINARY LOGS TO '{current}'")  # yet, or before InnoDB's checkpoint
                        cur.execute("SHOW BINARY LOGS")
                        if [row[0] for row in cur.fetchall()] == [current]:
                            return
                        time.sleep(0.05)
                    raise AssertionError(f"the server kept files before {current}")

            # Nothing was logged after the checkpoint in its file: once the file is purged, the stream still
            # starts by the checkpoint's GTID set at the oldest retained file. Not lost: a run resumes.
            set_expiry(3600)
            purge_all_but_the_current_file()
            resumable = views.check()
            assert resumable.passed, resumable.description
            assert "GTID set" in resumable.description
            execute(src, "INSERT INTO t VALUES (2, 2)")
            assert sync(rt, until_caught_up=True).events == 1
            needed = rt.resumer.checkpoint().position

            # Now transactions after the checkpoint lie in a file that goes: lost.
            execute(src, "INSERT INTO t VALUES (3, 3)")
            execute(admin, "FLUSH BINARY LOGS")
            purge_all_but_the_current_file()
            lost = views.check()
            assert not lost.passed and lost.severity is dg.AssetCheckSeverity.ERROR, lost.description
            assert f"{needed.file} holding position" in lost.description and "plan --replan" in lost.description
            assert views.tick().startswith("not launching: headroom lost")
            assert views.cli()["headroom"] == "lost"
            with pytest.raises(PositionLost):  # the reader agrees: the position is gone
                sync(rt, until_caught_up=True)
        finally:
            rt.close()
