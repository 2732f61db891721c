"""Each MySQL capture check fires on a live MariaDB, and `cdc-assets plan` reports the binlog retention.

A private MariaDB of this module's own: its global settings are changed (and restored), which the session's
server, shared by every test, must not see.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from cdc_assets.cli import main
from cdc_assets.core.urls import DbUrl
from cdc_assets.dev.mariadb import MariaDbServer
from cdc_assets.dev.processes import free_port
from cdc_assets.errors import SourceSetupError
from cdc_assets.sources.mysql.source import MysqlSource
from cdc_assets_tests.support import write_config


@pytest.fixture(scope="module")
def own_mariadb():
    base = Path(tempfile.mkdtemp(prefix="cdc-test-capture-"))
    server = MariaDbServer(base, free_port(), server_id=7).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


def _exec(server: MariaDbServer, *statements: str) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


def _check(server: MariaDbServer) -> list[str]:
    source = MysqlSource(DbUrl.parse(server.url()))
    try:
        return source.check_capture()
    finally:
        source.close()


def test_a_capturable_mariadb_passes_and_reports_its_retention(own_mariadb):
    assert _check(own_mariadb) == [f"binlog retention on mysql://cdc:***@127.0.0.1:{own_mariadb.port}/ "
                                   f"(MariaDB {_version(own_mariadb)}): no expiry set (binlog_expire_logs_seconds=0): "
                                   "binlogs stay until purged"]
    _exec(own_mariadb, "SET GLOBAL binlog_expire_logs_seconds = 3600")
    try:
        retention, warning = _check(own_mariadb)
    finally:
        _exec(own_mariadb, "SET GLOBAL binlog_expire_logs_seconds = 0")
    assert retention.endswith("1 hours (binlog_expire_logs_seconds=3600)")
    assert "under a day" in warning


@pytest.mark.parametrize("setting, bad, good", [
    ("binlog_format", "STATEMENT", "ROW"),
    ("binlog_row_image", "MINIMAL", "FULL"),
    ("binlog_row_metadata", "MINIMAL", "FULL"),
])
def test_each_setting_is_refused_on_a_live_server(own_mariadb, setting, bad, good):
    _exec(own_mariadb, f"SET GLOBAL {setting} = '{bad}'")
    try:
        with pytest.raises(SourceSetupError) as caught:
            _check(own_mariadb)
    finally:
        _exec(own_mariadb, f"SET GLOBAL {setting} = '{good}'")
    message = str(caught.value)
    assert f"{setting} is {bad} on mysql://cdc:***@127.0.0.1:{own_mariadb.port}/" in message
    assert f"set {setting}={good}" in message


def test_a_replica_without_log_slave_updates_is_refused(own_mariadb, servers):
    # A configured (not started) replica shows a source in SHOW REPLICA STATUS; log_slave_updates is OFF by
    # default and read-only at runtime.
    primary = servers.mariadb
    _exec(own_mariadb, f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, "
                       f"MASTER_USER='{primary.user}', MASTER_PASSWORD='{primary.password}'")
    try:
        with pytest.raises(SourceSetupError, match=r"is a replica and log_slave_updates is OFF.*"
                                                   r"set log_slave_updates=ON"):
            _check(own_mariadb)
    finally:
        _exec(own_mariadb, "RESET SLAVE ALL")
    assert _check(own_mariadb)  # not a replica any more


def test_plan_prints_the_binlog_retention(own_mariadb, servers, tmp_path, monkeypatch, capsys, unique_name, pg_target):
    db, (target_db, _) = unique_name, pg_target
    _exec(own_mariadb, f"CREATE DATABASE `{db}`", f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)",
          f"INSERT INTO `{db}`.t VALUES (1), (2)", "SET GLOBAL binlog_expire_logs_seconds = 172800")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    # The CLI quiets the libraries through the environment (PYTHONWARNINGS, the JVM's stderr file); run in this
    # process, it must not leave that to the processes later tests start.
    monkeypatch.setattr(os, "environ", os.environ.copy())
    try:
        path = write_config(tmp_path, servers, task_id=f"ret_{db}", source="mysql", source_db=db, tables=[f"{db}.t"],
                            target="postgres", target_db=target_db)
        raw = path.read_text().replace(servers.mariadb.url(), own_mariadb.url())
        path.write_text(raw)
        assert main(["--config", str(path), "plan"]) == 0
    finally:
        _exec(own_mariadb, "SET GLOBAL binlog_expire_logs_seconds = 0", f"DROP DATABASE `{db}`")
    out = capsys.readouterr().out
    assert f"binlog retention on mysql://cdc:***@127.0.0.1:{own_mariadb.port}/" in out
    assert "2 days (binlog_expire_logs_seconds=172800)" in out


def _version(server: MariaDbServer) -> str:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            return cur.fetchone()[0]
    finally:
        conn.close()
