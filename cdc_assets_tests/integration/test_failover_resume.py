"""A failover: the task resumes on a GTID replica of its source, by the GTID set its checkpoint recorded.

The replica is a second private MariaDB (server_id 2, binlog files named replica-bin.*, log_slave_updates)
replicating the session's MariaDB with MASTER_USE_GTID=slave_pos from the primary's position at fixture time.
"""
from __future__ import annotations

import time

import pytest
import yaml

from cdc_assets.config import load_config
from cdc_assets.core import gtid_sets
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.urls import DbUrl
from cdc_assets.dev.mariadb import MariaDbServer
from cdc_assets.dev.processes import free_port
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import PositionLost
from cdc_assets.sources.mysql.binlog import BinlogReader
from cdc_assets_tests.support import fetch_rows, snapshot_all, write_config

CATCH_UP_SECS = 60


def _one(conn, sql: str, *args):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchone()[0]


def _exec(conn, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


@pytest.fixture
def replica(servers):
    """A MariaDB replicating the session's one from its current GTID position on."""
    primary = servers.mariadb
    server = MariaDbServer(servers.base_dir / f"replica_{free_port()}", free_port(), server_id=2,
                           binlog_basename="replica-bin", options=("log-slave-updates=1",)).start()
    conn, pconn = server.connect(), primary.connect()
    try:
        _exec(conn, f"SET GLOBAL gtid_slave_pos = '{_one(pconn, 'SELECT @@GLOBAL.gtid_binlog_pos')}'",
              f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, MASTER_USER='{primary.user}', "
              f"MASTER_PASSWORD='{primary.password}', MASTER_USE_GTID=slave_pos", "START SLAVE")
        yield server
    finally:
        pconn.close()
        conn.close()
        server.stop()


def wait_caught_up(primary_conn, replica_conn) -> None:
    want = _one(primary_conn, "SELECT @@GLOBAL.gtid_binlog_pos")
    deadline = time.monotonic() + CATCH_UP_SECS
    while not gtid_sets.contains(_one(replica_conn, "SELECT @@GLOBAL.gtid_binlog_pos") or "", want):
        if time.monotonic() > deadline:
            with replica_conn.cursor() as cur:
                cur.execute("SHOW SLAVE STATUS")
                status = cur.fetchone()
            raise AssertionError(f"the replica did not reach {want} in {CATCH_UP_SECS} s: {status}")
        time.sleep(0.1)


def test_sync_resumes_on_a_replica_after_failover_by_gtid(tmp_path, servers, spark, replica, unique_name, pg_target):
    db, (target_db, target) = unique_name, pg_target
    primary = servers.mariadb.connect()
    replica_conn = replica.connect()
    try:
        _exec(primary, f"CREATE DATABASE `{db}`", f"CREATE TABLE `{db}`.items (id INT PRIMARY KEY, v VARCHAR(20))",
              *[f"INSERT INTO `{db}`.items VALUES {', '.join(f'({i}, {chr(39)}p{i}{chr(39)})' for i in range(b, b + 50))}"
                for b in range(1, 301, 50)])
        path = write_config(tmp_path, servers, task_id=f"fo_{db}", source="mysql", source_db=db,
                            tables=[f"{db}.items"], target="postgres", target_db=target_db,
                            snapshot={"split_size": 100})
        rt = TaskRuntime(load_config(path))
        rt.adopt_spark(spark)
        try:
            snapshot_all(rt)
            _exec(primary, f"UPDATE `{db}`.items SET v = 'first' WHERE id <= 10")
            sync(rt, until_caught_up=True)
            on_primary = rt.resumer.checkpoint().position
        finally:
            rt.close()
        assert on_primary.server == "1" and on_primary.gtid_set.startswith("0-1-")

        # More on the primary after the checkpoint; the replica gets it; the primary "fails".
        _exec(primary, f"UPDATE `{db}`.items SET v = 'after' WHERE id BETWEEN 11 AND 20",
              f"DELETE FROM `{db}`.items WHERE id BETWEEN 21 AND 25", f"INSERT INTO `{db}`.items VALUES (1000, 'p')")
        wait_caught_up(primary, replica_conn)
        _exec(replica_conn, "STOP SLAVE",
              f"INSERT INTO `{db}`.items VALUES (2000, 'on replica')",
              f"UPDATE `{db}`.items SET v = 'replica' WHERE id BETWEEN 30 AND 35",
              f"DELETE FROM `{db}`.items WHERE id = 1")
        assert not any(f[0].startswith("mysql-bin") for f in _rows(replica_conn, "SHOW BINARY LOGS"))

        raw = yaml.safe_load(path.read_text())
        raw["source"]["url"] = replica.url()
        path.write_text(yaml.safe_dump(raw))
        rt = TaskRuntime(load_config(path))
        rt.adopt_spark(spark)
        try:
            report = sync(rt, until_caught_up=True)
            after = rt.resumer.checkpoint().position
        finally:
            rt.close()
        assert report.events == 10 + 5 + 1 + 1 + 6 + 1
        assert after.server == "2" and after.file.startswith("replica-bin") and after.gtid_set.startswith("0-2-")
        want = fetch_rows(replica_conn, f"`{db}`.items", "id")
        assert fetch_rows(target, f'"{db}".items', "id") == want and len(want) == 300 - 5 - 1 + 2
    finally:
        _exec(replica_conn, f"DROP DATABASE IF EXISTS `{db}`")
        _exec(primary, f"DROP DATABASE IF EXISTS `{db}`")
        primary.close()
        replica_conn.close()


def _rows(conn, sql: str) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def test_a_position_neither_file_nor_gtid_reaches_is_lost_naming_position_and_server(replica):
    url = DbUrl.parse(replica.url())
    reader = BinlogReader(url, 4711, {})
    beyond = MysqlPosition("mysql-bin.000001", 4, "0-1-999999", "1")  # the primary's, ahead of anything logged
    with pytest.raises(PositionLost) as caught:
        list(reader.read(beyond, stop_at=beyond))
    message = str(caught.value)
    assert "mysql-bin.000001:4 of server 1" in message and "GTID set 0-1-999999" in message
    assert "cdc-assets plan --replan" in message and f":{replica.password}@" not in message

    no_gtid = MysqlPosition("mysql-bin.000001", 4, "", "1")
    with pytest.raises(PositionLost, match=r"is server 2, not server 1 whose binlog holds mysql-bin.000001:4 .*"
                                           r"no GTID set.*plan --replan"):
        list(reader.read(no_gtid, stop_at=no_gtid))
