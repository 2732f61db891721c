"""caching_sha2_password on a real MySQL 8.0/8.4 server (CDC_TEST_MYSQL8_URL, an account that may CREATE USER): our
three connections (PyMySQL, the binlog replication stream, Spark's Connector/J) log in to an account created WITH
caching_sha2_password, after FLUSH PRIVILEGES empties the server's cache so that each takes full authentication:
over plain TCP (RSA key fetched from the server) and over TLS (MySQL 8 generates its certificates at first start).
Set CDC_TEST_MYSQL8_CA to the server's ca.pem to test VERIFY_CA as well.

Written by reading: skipped where no MySQL 8 runs (this machine has MariaDB only); the same paths run against the
MySQL 8.4 stand-in in test_caching_sha2_login.py.
"""
from __future__ import annotations

import os
import uuid
from urllib.parse import quote

import pytest
from pymysqlreplication.event import RotateEvent

from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.dbapi.jdbc import mysql_jdbc
from cdc_assets.errors import LoginError
from cdc_assets.sources.mysql.stream import fetch, open_stream
from cdc_assets.sources.mysql.stream_start import FIRST_EVENT_OFFSET
from cdc_assets.spark.warm_up import warm_up
from cdc_assets_tests.support import MYSQL8_URL, mysql8

pytestmark = mysql8
PASSWORD = "Sha2&pw-" + uuid.uuid4().hex[:8]
CA = os.environ.get("CDC_TEST_MYSQL8_CA", "")


@pytest.fixture(scope="module")
def sha2_user():
    """A caching_sha2_password account with what the CDC user needs (docker/mysql-init.sql), dropped afterwards."""
    admin_url = DbUrl.parse(MYSQL8_URL)
    name = f"cdc_sha2_{uuid.uuid4().hex[:6]}"
    admin = connect(admin_url, database="")
    with admin.cursor() as cur:
        cur.execute(f"CREATE USER '{name}'@'%' IDENTIFIED WITH caching_sha2_password BY %s", (PASSWORD,))
        cur.execute(f"GRANT SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{name}'@'%'")
        cur.execute("SELECT plugin FROM mysql.user WHERE user = %s", (name,))
        assert cur.fetchone()[0] == "caching_sha2_password"
    yield admin, admin_url, name
    with admin.cursor() as cur:
        cur.execute(f"DROP USER '{name}'@'%'")
    admin.close()


def user_url(sha2_user, query: str, password: str = PASSWORD) -> DbUrl:
    admin, admin_url, name = sha2_user
    with admin.cursor() as cur:
        cur.execute("FLUSH PRIVILEGES")  # empties the caching_sha2 cache: the next login takes full authentication
    return DbUrl.parse(f"mysql://{name}:{quote(password, safe='')}@{admin_url.host}:{admin_url.port}/?{query}")


def ssl_cipher(url: DbUrl) -> str:
    conn = connect(url, database="")
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            return cur.fetchone()[1]
    finally:
        conn.close()


def first_binlog(url: DbUrl) -> MysqlPosition:
    conn = connect(url, database="")
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            return MysqlPosition(cur.fetchone()[0], FIRST_EVENT_OFFSET)
    finally:
        conn.close()


def replication_login(url: DbUrl, first: MysqlPosition) -> None:
    stream = open_stream(url, 4322, first, [RotateEvent], [])
    try:
        fetch(stream, url, first)
    finally:
        stream.close()


QUERIES = {"plain TCP": "ssl-mode=DISABLED", "TLS": "ssl-mode=REQUIRED"}
if CA:
    QUERIES["verified TLS"] = f"ssl-mode=VERIFY_CA&ssl-ca={CA}"


@pytest.mark.parametrize("query", QUERIES.values(), ids=list(QUERIES))
def test_pymysql_and_replication_log_in_with_full_auth(sha2_user, query):
    url = user_url(sha2_user, query)
    assert bool(ssl_cipher(url)) == (query != "ssl-mode=DISABLED")
    first = first_binlog(DbUrl.parse(MYSQL8_URL))
    replication_login(user_url(sha2_user, query), first)


@pytest.mark.spark
@pytest.mark.parametrize("query", QUERIES.values(), ids=list(QUERIES))
def test_spark_jdbc_logs_in_with_full_auth(spark, sha2_user, query):
    warm_up(spark, mysql_jdbc(user_url(sha2_user, query)))


@pytest.mark.spark
def test_a_wrong_password_names_each_connection(spark, sha2_user):
    url = user_url(sha2_user, "ssl-mode=DISABLED", password="Wrong-pw-7")
    first = first_binlog(DbUrl.parse(MYSQL8_URL))
    for connection, attempt in [("the PyMySQL connection", lambda: connect(url)),
                                ("the binlog replication connection", lambda: replication_login(url, first)),
                                ("the Spark JDBC connection", lambda: warm_up(spark, mysql_jdbc(url)))]:
        with pytest.raises(LoginError) as err:
            attempt()
        assert f"over {connection}" in err.value.message and "Access denied" in err.value.message
        assert "Wrong-pw-7" not in str(err.value)
