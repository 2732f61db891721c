"""TLS and the RSA key exchange from a MySQL URL, the same for PyMySQL, the replication connection and Connector/J;
and how a refused login is told.

The driver messages below were printed by the real clients against the MySQL 8.4 stand-in
(cdc_assets_tests/mysql8_handshake.py): PyMySQL 1.2.4 and MariaDB Connector/J 2.7.6 (Debian's jar)."""
from __future__ import annotations

import pytest

from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.jdbc import mysql_jdbc
from cdc_assets.dbapi.mysql_login import (ACCESS_HINT, KEY_HINT, NETWORK_HINT, PYMYSQL, SPARK_JDBC, TLS_HINT, MysqlLogin,
                                          SslMode, refused)
from cdc_assets.errors import ConfigError, LoginError, UnreachableError
from cdc_assets.sources.mysql.stream import replication_settings

BASE = "mysql://cdc:pw-Secret@db.example:3306/"


def login(query: str = "") -> MysqlLogin:
    return MysqlLogin.from_url(DbUrl.parse(BASE + (f"?{query}" if query else "")))


def test_default_is_preferred_and_lets_connector_j_fetch_the_key_as_pymysql_does():
    default = login()
    assert default.ssl_mode == SslMode.PREFERRED
    assert default.pymysql_args() == {}  # PyMySQL's own PREFERRED, which fetches the key when it has none
    assert default.jdbc_properties() == (("allowPublicKeyRetrieval", "true"),)


@pytest.mark.parametrize("query, ssl, jdbc", [
    ("ssl-mode=REQUIRED", {"verify_mode": False, "check_hostname": False},
     (("useSsl", "true"), ("trustServerCertificate", "true"))),
    ("ssl-mode=verify_ca&ssl-ca=/etc/mysql/ca.pem", {"verify_mode": True, "check_hostname": False, "ca": "/etc/mysql/ca.pem"},
     (("useSsl", "true"), ("serverSslCert", "/etc/mysql/ca.pem"), ("disableSslHostnameVerification", "true"))),
    ("ssl-mode=VERIFY_IDENTITY&ssl-ca=/etc/mysql/ca.pem", {"verify_mode": True, "check_hostname": True, "ca": "/etc/mysql/ca.pem"},
     (("useSsl", "true"), ("serverSslCert", "/etc/mysql/ca.pem"))),
])
def test_tls_modes_reach_all_three_connections(query, ssl, jdbc):
    url = DbUrl.parse(f"{BASE}?{query}")
    assert MysqlLogin.from_url(url).pymysql_args() == {"ssl": ssl}
    assert replication_settings(url)["ssl"] == ssl
    assert mysql_jdbc(url).options[1:] == jdbc
    assert "useSsl" not in mysql_jdbc(url).url  # properties, not URL text: a path needs no escaping


def test_disabled_turns_off_pymysqls_opportunistic_tls():
    assert login("ssl-mode=DISABLED").pymysql_args() == {"ssl_disabled": True}
    assert login("ssl-mode=DISABLED").jdbc_properties() == (("allowPublicKeyRetrieval", "true"),)


def test_a_pinned_public_key_replaces_retrieval_everywhere(tmp_path):
    key = tmp_path / "public_key.pem"
    key.write_bytes(b"-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----\n")
    url = DbUrl.parse(f"{BASE}?server-public-key-path={key}")
    assert replication_settings(url)["server_public_key"] == key.read_bytes()
    assert mysql_jdbc(url).options[1:] == (("serverRsaPublicKeyFile", str(key)),)


def test_a_missing_public_key_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read server-public-key-path"):
        login(f"server-public-key-path={tmp_path / 'absent.pem'}").pymysql_args()


@pytest.mark.parametrize("query, expected", [
    ("sslmode=require", "unknown URL parameter"),
    ("ssl-mode=PREFERED", "is not a TLS mode"),
    ("ssl-mode=VERIFY_CA", "no ssl-ca is given"),
    ("ssl-ca=/ca.pem", "never checks a certificate"),
])
def test_url_parameters_are_checked_up_front(query, expected):
    with pytest.raises(ConfigError, match=expected) as err:
        login(query)
    assert "pw-Secret" not in str(err.value)


@pytest.mark.parametrize("reason, kind, hint", [
    ("Access denied for user 'cdc'@'localhost' (using password: YES) (1045)", LoginError, ACCESS_HINT),
    ("RSA public key is not available client side (option serverRsaPublicKeyFile not set)", LoginError, KEY_HINT),
    ("caching sha2: Unknown packet for public key: b'\\x00'", LoginError, KEY_HINT),
    ("SSL is required but the server doesn't support it (2026)", LoginError, TLS_HINT),
    ("Trying to connect with ssl, but ssl not enabled in the server", LoginError, TLS_HINT),
    ("Can't connect to MySQL server on '127.0.0.1' ([SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
     "unable to get local issuer certificate (_ssl.c:1006)) (2003)", LoginError, TLS_HINT),
    ("Could not connect to 127.0.0.1:41231 : PKIX path validation failed: java.security.cert.CertPathValidatorException: "
     "Path does not chain with any of the trust anchors", LoginError, TLS_HINT),
    ("Can't connect to MySQL server on 'mytls-db' ([Errno 111] Connection refused) (2003)", UnreachableError, NETWORK_HINT),
])
def test_a_refusal_names_the_connection_and_the_way_out(reason, kind, hint):
    url = DbUrl.parse(BASE)
    failure = refused(SPARK_JDBC, url, reason + " pw-Secret")
    assert type(failure) is kind and failure.hint == hint
    assert failure.message.startswith(f"cannot connect to mysql://cdc:***@db.example:3306/ over {SPARK_JDBC}: ")
    assert "pw-Secret" not in str(failure)


def test_a_refusal_of_a_masked_url_masks_the_given_password():
    failure = refused(PYMYSQL, "mysql://cdc:***@h:3306/", "Access denied for pw-Secret", "pw-Secret")
    assert "pw-Secret" not in str(failure) and "over the PyMySQL connection" in failure.message


def test_the_docker_task_logs_in_to_mysql_84_over_tls(monkeypatch):
    """docker/compose.yaml's MySQL 8.4 gives 'cdc' caching_sha2_password (the 8.4 default) and TLS (certificates
    generated at first start): the task asks TLS of all three connections, so no RSA key crosses the wire."""
    from pathlib import Path

    from cdc_assets.config import load_config

    monkeypatch.setenv("CDC_SRC_PASSWORD", "pw-Secret")
    monkeypatch.setenv("PG_PASSWORD", "pg")
    url = load_config(Path(__file__).parents[2] / "docker" / "task.yaml").source.db_url
    assert "ssl" in replication_settings(url) and ("useSsl", "true") in mysql_jdbc(url).options
