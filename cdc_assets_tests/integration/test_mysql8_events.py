"""Binlog events only MySQL 8 writes, on a real MySQL 8.0/8.4 (CDC_TEST_MYSQL8_URL; skipped without one): a session
with binlog_transaction_compression=ON writes TRANSACTION_PAYLOAD_EVENTs, one with binlog_row_value_options=
PARTIAL_JSON writes PARTIAL_UPDATE_ROWS_EVENTs; both are read whole. INVISIBLE columns and functional indexes
(hidden generated columns) replicate exactly: every described column, nothing else. Written by reading the MySQL
manual and source; not run on this machine (no MySQL 8 here)."""
from __future__ import annotations

import pytest

from cdc_assets.core.events import Op, Transaction
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.sources.mysql.binlog import BinlogReader
from cdc_assets.sources.mysql.stream import default_server_id
from cdc_assets.sources.mysql.source import MysqlSource
from cdc_assets_tests.support import MYSQL8_URL, mysql8

pytestmark = mysql8


@pytest.fixture
def mysql8_db(unique_name):
    url = DbUrl.parse(MYSQL8_URL)
    conn = connect(url, database="")
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.binlog_row_metadata, @@GLOBAL.binlog_row_image, @@GLOBAL.binlog_format")
        settings = cur.fetchone()
        if tuple(s.upper() for s in settings) != ("FULL", "FULL", "ROW"):
            pytest.skip(f"the MySQL 8 server at {url} logs with binlog_row_metadata, binlog_row_image, binlog_format "
                        f"= {settings}: start it with FULL, FULL, ROW")
        cur.execute(f"CREATE DATABASE `{unique_name}`")
        cur.execute(f"USE `{unique_name}`")
    try:
        yield url, unique_name, conn
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{unique_name}`")
        conn.close()


def changes_between(url: DbUrl, table: TableId, run) -> tuple[list, list[Transaction]]:
    """Run `run()` and read back, from the binlog, every committed change of `table` it made."""
    source = MysqlSource(url)
    try:
        schema = source.describe(table)
        start = source.current_position()
        run()
        end = source.current_position()
    finally:
        source.close()
    reader = BinlogReader(url, default_server_id(f"m8events#{table}"), {table: schema})
    items = [i for i in reader.read(start, stop_at=end) if isinstance(i, Transaction)]
    return [c.name for c in schema.columns], items


def session(conn, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def source_rows(conn, sql: str) -> dict:
    with conn.cursor() as cur:
        cur.execute(sql)
        return {row[0]: row for row in cur.fetchall()}


def test_a_compressed_transaction_is_read_whole(mysql8_db):
    url, db, conn = mysql8_db
    session(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), doc JSON)")

    def run():
        session(conn, "SET SESSION binlog_transaction_compression = ON", "BEGIN",
                "INSERT INTO t VALUES (1, 'one', '{\"a\": [1, 2.5e20]}'), (2, 'two', NULL), (3, 'three', '[]')",
                "UPDATE t SET v = 'uno' WHERE id = 1", "DELETE FROM t WHERE id = 2", "COMMIT",
                "SET SESSION binlog_transaction_compression = OFF")
    _, transactions = changes_between(url, TableId(db, "t"), run)
    assert len(transactions) == 1  # on 1.0.17 as is: none, the rows vanished
    tx = transactions[0]
    assert [(c.op, c.key) for c in tx.changes] == [(Op.INSERT, (1,)), (Op.INSERT, (2,)), (Op.INSERT, (3,)),
                                                   (Op.UPDATE, (1,)), (Op.DELETE, (2,))]
    now = source_rows(conn, "SELECT id, v, CAST(doc AS CHAR) FROM t")
    assert tx.changes[3].after == dict(zip(("id", "v", "doc"), now[1]))


def test_partial_json_updates_arrive_as_whole_documents(mysql8_db):
    url, db, conn = mysql8_db
    session(conn, "CREATE TABLE t (id INT PRIMARY KEY, n INT, doc JSON, other JSON)",
            "INSERT INTO t VALUES (1, 0, '{\"a\": 1, \"list\": [1, 2, 3], \"s\": \"xxxxxxxxxxxxxxxx\"}', '[1]'), "
            "(2, 0, '{\"k\": \"v\"}', '{}')")

    def run():
        session(conn, "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'", "SET SESSION binlog_row_image = FULL",
                "UPDATE t SET n = 1, doc = JSON_SET(doc, '$.a', 2, '$.s', 'short', '$.zz', 'new') WHERE id = 1",
                "UPDATE t SET doc = JSON_REMOVE(doc, '$.list[1]') WHERE id = 1",
                "UPDATE t SET doc = JSON_REPLACE(doc, '$.missing', 1), other = JSON_SET(other, '$.x', 1) WHERE id = 2",
                "SET SESSION binlog_row_value_options = ''")
    _, transactions = changes_between(url, TableId(db, "t"), run)
    last = {}
    for tx in transactions:
        for change in tx.changes:
            last[change.key[0]] = change.after
    now = source_rows(conn, "SELECT id, n, CAST(doc AS CHAR), CAST(other AS CHAR) FROM t")
    for key, row in now.items():
        assert last[key] == dict(zip(("id", "n", "doc", "other"), row)), key


def test_compressed_partial_json_updates(mysql8_db):
    url, db, conn = mysql8_db
    session(conn, "CREATE TABLE t (id INT PRIMARY KEY, doc JSON)", "INSERT INTO t VALUES (1, '{\"a\": [1, 2]}')")

    def run():
        session(conn, "SET SESSION binlog_transaction_compression = ON",
                "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
                "UPDATE t SET doc = JSON_SET(doc, '$.a[0]', 10, '$.b', JSON_OBJECT('c', 1.5))",
                "SET SESSION binlog_row_value_options = ''", "SET SESSION binlog_transaction_compression = OFF")
    _, transactions = changes_between(url, TableId(db, "t"), run)
    [change] = [c for tx in transactions for c in tx.changes]
    assert change.after["doc"] == source_rows(conn, "SELECT id, CAST(doc AS CHAR) FROM t")[1][1]


def test_invisible_and_functional_index_columns_replicate_exactly(mysql8_db):
    """INVISIBLE (8.0.23) columns are logged and described; a functional index (8.0.13) adds a hidden virtual
    column ('!hidden!...') that information_schema.COLUMNS does not list: it never reaches a change."""
    url, db, conn = mysql8_db
    session(conn, "CREATE TABLE t (id INT PRIMARY KEY, v INT, secret VARCHAR(10) INVISIBLE, doc JSON, "
                  "INDEX twice ((v * 2)), INDEX by_a ((CAST(doc->>'$.a' AS UNSIGNED))))")

    def run():
        session(conn, "INSERT INTO t (id, v, secret, doc) VALUES (1, 5, 'hush', '{\"a\": 3}'), (2, 6, NULL, NULL)",
                "UPDATE t SET v = 7, secret = 'still' WHERE id = 1")
    names, transactions = changes_between(url, TableId(db, "t"), run)
    assert names == ["id", "v", "secret", "doc"]
    last = {}
    for tx in transactions:
        for change in tx.changes:
            assert set(change.after) == set(names)
            last[change.key[0]] = change.after
    now = source_rows(conn, "SELECT id, v, secret, CAST(doc AS CHAR) FROM t")
    assert last == {k: dict(zip(names, row)) for k, row in now.items()}
