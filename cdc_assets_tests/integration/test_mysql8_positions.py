"""Positions, GTID sets and capture checks on a real MySQL 8.0/8.4 (CDC_TEST_MYSQL8_URL, e.g. the compose file's).

Written by reading the MySQL 8.0/8.4 manuals; not run on this machine (no MySQL 8 here).
"""
from __future__ import annotations

import uuid

from cdc_assets.core.events import Transaction
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.sources.mysql.binlog import BinlogReader
from cdc_assets.sources.mysql.source import MysqlSource
from cdc_assets_tests.support import MYSQL8_URL, mysql8

pytestmark = mysql8


def _source() -> MysqlSource:
    return MysqlSource(DbUrl.parse(MYSQL8_URL))


def _one(conn, sql: str):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()[0]


def test_position_comes_from_the_flavours_status_statement_with_server_and_gtid_set():
    source = _source()
    try:
        assert not source.flavour.mariadb and source.flavour.at_least(8)
        want = "SHOW BINARY LOG STATUS" if source.flavour.at_least(8, 2) else "SHOW MASTER STATUS"
        assert source.flavour.binlog_status_sql == want
        position = source.current_position()
        with source.conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            files = [row[0] for row in cur.fetchall()]
        assert position.file in files
        assert position.server == _one(source.conn, "SELECT @@GLOBAL.server_uuid")
        if _one(source.conn, "SELECT @@GLOBAL.gtid_mode") == "ON":
            assert position.gtid_set == _one(source.conn, "SELECT @@GLOBAL.gtid_executed").replace("\n", "")
    finally:
        source.close()


def test_each_transaction_end_carries_gtid_executed_and_a_gtid_start_reads_on():
    url = DbUrl.parse(MYSQL8_URL)
    db = f"m8_{uuid.uuid4().hex[:8]}"
    conn = connect(url, database="")
    source = _source()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{db}`")
            cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)")
        schema = source.describe(TableId(db, "t"))
        start = source.current_position()
        executed = []
        for i in range(3):
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO `{db}`.t VALUES ({i}, {i})")
            executed.append(_one(conn, "SELECT @@GLOBAL.gtid_executed").replace("\n", ""))
        stop = source.current_position()
        reader = BinlogReader(url, 7311, {schema.table: schema})
        ends = [item.end for item in reader.read(start, stop_at=stop) if isinstance(item, Transaction)]
        if _one(conn, "SELECT @@GLOBAL.gtid_mode") != "ON":
            assert [e.gtid_set for e in ends] == ["", "", ""]
            return
        assert [e.gtid_set for e in ends] == executed

        # As if recorded on another server: the stream opens at the GTID set and reads the two after it.
        elsewhere = MysqlPosition("other-bin.000001", 4, ends[0].gtid_set, "00000000-0000-0000-0000-00000000beef")
        again = [item for item in BinlogReader(url, 7312, {schema.table: schema}).read(elsewhere, stop_at=stop)
                 if isinstance(item, Transaction)]
        assert [t.end.gtid_set for t in again] == executed[1:]
        assert [c.key for t in again for c in t.changes] == [(1,), (2,)]
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
        conn.close()
        source.close()


def test_capture_checks_pass_on_the_compose_servers_flags():
    source = _source()
    try:
        notes = source.check_capture()
    finally:
        source.close()
    # not refused; the compose file sets a week of binlogs
    assert notes[0].startswith("binlog retention on ") and "binlog_expire_logs_seconds" in notes[0]
