"""caching_sha2_password, MySQL 8's default, for our three connections to a MySQL server: PyMySQL (dbapi.connect),
the binlog replication stream (pymysqlreplication through `open_stream`) and Spark's JDBC driver (MariaDB
Connector/J 2.7 in Spark's JVM), each a real client against a stand-in that speaks MySQL 8.4's connection phase
(cdc_assets_tests/mysql8_handshake.py: MariaDB here has no caching_sha2_password).

The stand-in runs with its authentication cache off unless a test says otherwise, so every login takes the full
authentication a MySQL 8 server asks for after a restart: the password RSA-encrypted with a key fetched from the
server over plain TCP, or in clear inside TLS.
"""
from __future__ import annotations

import ssl

import pytest

from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.dbapi.jdbc import mysql_jdbc
from cdc_assets.errors import LoginError
from cdc_assets.sources.mysql.stream import READER_EVENTS, fetch, open_stream
from cdc_assets.sources.mysql.stream_start import FIRST_EVENT_OFFSET
from cdc_assets.spark.errors import root_cause
from cdc_assets.spark.warm_up import warm_up
from cdc_assets_tests.mysql8_handshake import Mysql8Server, tls_files

USER, PASSWORD, WRONG = "cdc", "Sha2-s3cret!", "Wrong-pw-42"
START = MysqlPosition("binlog.000001", FIRST_EVENT_OFFSET)
# What Spark's JDBC reader asks through warm_up: its schema probe and the read itself.
WARM_UP_ANSWERS = {"warm_up": (["warm_up"], [["1"]])}


@pytest.fixture
def server():
    with Mysql8Server(USER, PASSWORD, cache=False, answers=WARM_UP_ANSWERS) as srv:
        yield srv


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return tls_files(tmp_path_factory.mktemp("tls"))


def url_of(srv: Mysql8Server, password: str = PASSWORD, query: str = "") -> DbUrl:
    return DbUrl.parse(f"mysql://{USER}:{password}@127.0.0.1:{srv.port}/" + (f"?{query}" if query else ""))


def pymysql_login(url: DbUrl) -> None:
    connect(url).close()


def replication_login(url: DbUrl) -> None:
    """The stream as the binlog reader opens it: its replication and control connections log in, ask what the
    library asks, and reach the end of the (empty) log."""
    stream = open_stream(url, 4321, START, READER_EVENTS, [])
    try:
        assert fetch(stream, url, START) is None
    finally:
        stream.close()


def jdbc_login(spark, url: DbUrl) -> None:
    """Connector/J opens a connection with the properties Spark gets, registered the way Spark's JDBC reader does."""
    endpoint = mysql_jdbc(url)
    jvm = spark._jvm
    jvm.org.apache.spark.sql.execution.datasources.jdbc.DriverRegistry.register(endpoint.driver)
    props = jvm.java.util.Properties()
    for key, value in endpoint.properties().items():
        props.setProperty(key, value)
    jvm.java.sql.DriverManager.getConnection(endpoint.url, props).close()


# ---- plain TCP: full authentication with the server's public key ---------------------------------------------------

def test_pymysql_full_auth_fetches_the_public_key_and_logs_in(server):
    pymysql_login(url_of(server))
    [login] = server.logins
    assert (login.full_auth, login.public_key_sent, login.tls, login.accepted) == (True, True, False, True)


def test_pymysql_fast_auth_once_the_server_caches_the_account():
    with Mysql8Server(USER, PASSWORD, cache=True) as srv:
        pymysql_login(url_of(srv))
        pymysql_login(url_of(srv))
        assert [(lg.full_auth, lg.fast_auth, lg.accepted) for lg in srv.logins] == [(True, False, True), (False, True, True)]


def test_replication_stream_logs_in_with_full_auth(server):
    replication_login(url_of(server))
    assert len(server.logins) == 2  # the replication connection and the library's control connection
    assert all(lg.full_auth and lg.public_key_sent and lg.accepted for lg in server.logins)
    assert any("BINLOG_CHECKSUM" in q for lg in server.logins for q in lg.queries)


@pytest.mark.spark
def test_spark_jdbc_full_auth_over_plain_tcp_fetches_the_key(spark, server):
    """Failed on main: Connector/J refuses full authentication without the key ("RSA public key is not available
    client side (option serverRsaPublicKeyFile not set)")."""
    jdbc_login(spark, url_of(server))
    [login] = server.logins
    # Connector/J 2.7 guesses mysql_native_password; the server switches it to caching_sha2_password.
    assert (login.client_plugin, login.switched) == ("mysql_native_password", True)
    assert (login.full_auth, login.public_key_sent, login.accepted) == (True, True, True)


@pytest.mark.spark
def test_spark_warm_up_reads_through_caching_sha2(spark, server):
    warm_up(spark, mysql_jdbc(url_of(server)))
    assert server.logins and all(lg.accepted and lg.full_auth for lg in server.logins)
    assert any("warm_up" in q for lg in server.logins for q in lg.queries)


# ---- wrong password: which connection, why, never the password --------------------------------------------------

def test_pymysql_wrong_password_names_the_connection(server):
    with pytest.raises(LoginError) as err:
        pymysql_login(url_of(server, WRONG))
    text = str(err.value)
    assert "over the PyMySQL connection: Access denied for user 'cdc'" in text
    assert f"127.0.0.1:{server.port}" in text and "check the user and password" in err.value.hint
    assert WRONG not in text and PASSWORD not in text


def test_replication_wrong_password_names_the_connection(server):
    with pytest.raises(LoginError) as err:
        replication_login(url_of(server, WRONG))
    text = str(err.value)
    assert "over the binlog replication connection (PyMySQL): Access denied" in text
    assert WRONG not in text and "check the user and password" in err.value.hint


@pytest.mark.spark
def test_spark_warm_up_wrong_password_names_the_connection(spark, server):
    with pytest.raises(LoginError) as err:
        warm_up(spark, mysql_jdbc(url_of(server, WRONG)))
    text = str(err.value)
    assert f"cannot connect to mysql://cdc:***@127.0.0.1:{server.port}/ over the Spark JDBC connection " \
           "(MariaDB Connector/J): Access denied for user 'cdc'" in text
    assert WRONG not in text and "check the user and password" in err.value.hint


@pytest.mark.spark
def test_spark_split_read_wrong_password_names_the_connection(spark, server):
    """A split's read fails inside Spark: root_cause tells the login failure and the way out in one line."""
    endpoint = mysql_jdbc(url_of(server, WRONG))
    with pytest.raises(Exception) as err:
        spark.read.jdbc(endpoint.url, "(SELECT 1 AS warm_up) AS w", properties=endpoint.properties()).collect()
    message, where = root_cause(err.value)
    assert where == "connecting over the Spark JDBC connection (MariaDB Connector/J)"
    assert message.startswith("Access denied for user 'cdc'") and "check the user and password" in message
    assert WRONG not in message


# ---- TLS ------------------------------------------------------------------------------------------------------------

@pytest.mark.spark
def test_all_three_log_in_over_verified_tls_without_the_rsa_key(spark, tls):
    context, ca = tls
    with Mysql8Server(USER, PASSWORD, cache=False, tls=context) as srv:
        url = url_of(srv, query=f"ssl-mode=VERIFY_IDENTITY&ssl-ca={ca}")
        pymysql_login(url)
        replication_login(url)
        jdbc_login(spark, url)
        assert len(srv.logins) == 4
        assert all(lg.tls and lg.full_auth and not lg.public_key_sent and lg.accepted for lg in srv.logins)


@pytest.mark.spark
def test_required_tls_is_refused_by_all_three_when_the_server_has_none(spark, server):
    url = url_of(server, query="ssl-mode=REQUIRED")
    with pytest.raises(LoginError, match="over the PyMySQL connection: SSL is required"):
        pymysql_login(url)
    with pytest.raises(LoginError, match=r"over the binlog replication connection \(PyMySQL\): SSL is required"):
        replication_login(url)
    with pytest.raises(Exception, match="ssl not enabled in the server"):
        jdbc_login(spark, url)
    assert not any(lg.accepted for lg in server.logins)


@pytest.mark.spark
def test_a_certificate_from_another_ca_is_refused_with_the_tls_way_out(spark, tls, tmp_path):
    context, _ = tls
    _, other_ca = tls_files(tmp_path / "other")
    with Mysql8Server(USER, PASSWORD, cache=False, tls=context, answers=WARM_UP_ANSWERS) as srv:
        url = url_of(srv, query=f"ssl-mode=VERIFY_CA&ssl-ca={other_ca}")
        with pytest.raises(LoginError) as py_err:
            pymysql_login(url)
        with pytest.raises(LoginError) as jdbc_err:
            warm_up(spark, mysql_jdbc(url))
        assert not any(lg.accepted for lg in srv.logins)
    assert "CERTIFICATE_VERIFY_FAILED" in py_err.value.message and "ssl-ca" in py_err.value.hint
    assert "over the Spark JDBC connection (MariaDB Connector/J)" in jdbc_err.value.message
    assert "PKIX" in jdbc_err.value.message and "ssl-ca" in jdbc_err.value.hint


def test_disabled_tls_logs_in_over_plain_tcp_to_a_server_offering_tls(tls):
    context, _ = tls
    with Mysql8Server(USER, PASSWORD, cache=False, tls=context) as srv:
        pymysql_login(url_of(srv, query="ssl-mode=DISABLED"))
        pymysql_login(url_of(srv))  # PREFERRED: PyMySQL takes the TLS on offer
        assert [(lg.tls, lg.public_key_sent, lg.accepted) for lg in srv.logins] == [(False, True, True), (True, False, True)]


def test_connections_preferring_tls_share_one_context_and_still_take_the_tls_on_offer(tls):
    """PyMySQL would load the system's CA certificates into a new context for every connection (20-40 ms of CPU);
    a context that verifies nothing is shared instead, by the queries' connections and the binlog stream's."""
    context, ca = tls
    with Mysql8Server(USER, PASSWORD, cache=False, tls=context) as srv:
        first, second = connect(url_of(srv)), connect(url_of(srv))
        verified = connect(url_of(srv, query=f"ssl-mode=VERIFY_IDENTITY&ssl-ca={ca}"))
        try:
            assert first.ctx is second.ctx, "each connection built a TLS context of its own"
            assert verified.ctx is not first.ctx and verified.ctx.verify_mode == ssl.CERT_REQUIRED
        finally:
            for conn in (first, second, verified):
                conn.close()
        stream = open_stream(url_of(srv), 4321, START, READER_EVENTS, [])
        try:
            fetch(stream, url_of(srv), START)
            assert stream._stream_connection.ctx is first.ctx
        finally:
            stream.close()
        assert all(lg.tls and lg.accepted for lg in srv.logins) and len(srv.logins) == 5


@pytest.mark.spark
def test_a_pinned_public_key_is_used_without_asking_the_server(spark, server, tmp_path):
    key_file = tmp_path / "public_key.pem"
    key_file.write_bytes(server.public_pem)
    url = url_of(server, query=f"server-public-key-path={key_file}")
    pymysql_login(url)
    replication_login(url)
    jdbc_login(spark, url)
    assert len(server.logins) == 4
    assert all(lg.full_auth and not lg.public_key_sent and lg.accepted for lg in server.logins)
