"""Open DBAPI connections to MySQL/MariaDB and PostgreSQL, with errors that never show a password.

Every session runs in UTC so temporal values mean the same thing on both sides. MySQL sessions are strict
whatever the server's sql_mode: a value a column cannot hold is an error, never clipped, truncated or zeroed.
"""
from __future__ import annotations

import ssl

import pymysql
import psycopg2

from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.jdbc import MYSQL_SESSION_INIT
from cdc_assets.dbapi.mysql_login import PYMYSQL, MysqlLogin, SslMode, refused
from cdc_assets.errors import NETWORK_HINT, UnreachableError, scrub

# NO_ZERO_DATE and NO_ZERO_IN_DATE: a MySQL target refuses MySQL's zero dates as a PostgreSQL one does (the log
# refuses them too: sources/mysql/zero_dates.py).
STRICT_UTC_SESSION = ("SET time_zone = '+00:00', sql_mode = CONCAT_WS(',', NULLIF(@@sql_mode, ''), 'STRICT_ALL_TABLES', "
                      "'NO_ZERO_DATE', 'NO_ZERO_IN_DATE')")


class MysqlConnection(pymysql.connections.Connection):
    """PyMySQL's connection, sharing one TLS context among the connections that only prefer TLS. PyMySQL builds a
    context per connection, loading the system's CA certificates into it (20-40 ms of CPU each) that a context which
    verifies nothing never uses: verification opens connections by the hundred a minute, and the binlog readers
    two each."""

    _preferred: ssl.SSLContext | None = None  # PyMySQL's own context for `{}` (TLS if offered, nothing verified)

    def _create_ssl_ctx(self, sslp):
        if sslp != {}:
            return super()._create_ssl_ctx(sslp)
        if MysqlConnection._preferred is None:  # two threads building one each at first is harmless
            MysqlConnection._preferred = super()._create_ssl_ctx(sslp)
        return MysqlConnection._preferred


def postgres_args(url: DbUrl, database: str | None = None) -> dict:
    """psycopg2.connect keywords: UTC, ISO dates. A plain dict, so Spark can ship it to Python workers."""
    return dict(host=url.host, port=url.port, user=url.user or None, password=url.password or None,
                dbname=(url.database if database is None else database) or "postgres", connect_timeout=10,
                options="-c TimeZone=UTC -c DateStyle=ISO")


def mysqlclient_args(url: DbUrl) -> dict | None:
    """MySQLdb._mysql.connect keywords reading as the JDBC snapshot reads (dbapi/jdbc.MYSQL_SESSION_INIT), or None
    where the URL asks for TLS or an RSA key file, which only the JDBC and PyMySQL logins were tested with. A
    target's COPY or a read limit can hold the read: the server waits up to net_write_timeout for it, not 60 s.
    A plain dict, so Spark can ship it to Python workers."""
    login = MysqlLogin.from_url(url)
    if login.requires_tls or login.server_public_key_path:
        return None
    return dict(host=url.host, port=url.port, user=url.user, password=url.password, charset="utf8mb4",
                connect_timeout=10, init_command=f"{MYSQL_SESSION_INIT}, net_write_timeout = 3600",
                **({"ssl_mode": "DISABLED"} if login.ssl_mode == SslMode.DISABLED else {}))


def connect(url: DbUrl, database: str | None = None, *, autocommit: bool = True):
    """Raises LoginError when a MySQL server refuses the login (see mysql_login), UnreachableError otherwise."""
    db = url.database if database is None else database
    try:
        if url.db_type == "mysql":
            return MysqlConnection(
                host=url.host, port=url.port, user=url.user, password=url.password, database=db or None,
                autocommit=autocommit, charset="utf8mb4", local_infile=True, connect_timeout=10,
                init_command=STRICT_UTC_SESSION, **MysqlLogin.from_url(url).pymysql_args(),
            )
        if url.db_type == "postgres":
            conn = psycopg2.connect(**postgres_args(url, db))
            conn.autocommit = autocommit
            return conn
    except pymysql.err.OperationalError as exc:
        raise refused(PYMYSQL, url.with_database(db), _pymysql_reason(exc)) from None
    except psycopg2.OperationalError as exc:
        reason = scrub(str(exc), url.password)
        raise UnreachableError(
            f"cannot connect to {url.with_database(db)}: {reason.strip().splitlines()[0]}", NETWORK_HINT,
        ) from None
    raise ValueError(f"no DBAPI connection for {url.db_type}")


def _pymysql_reason(exc: pymysql.err.OperationalError) -> str:
    """The server's or the client's message: (1045, "Access denied ...") -> "Access denied ... (1045)"."""
    if len(exc.args) == 2:
        return f"{str(exc.args[1]).strip().splitlines()[0]} ({exc.args[0]})"
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def quote_ident(dialect: str, name: str) -> str:
    if dialect == "mysql":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def qualified(dialect: str, namespace: str, name: str) -> str:
    return f"{quote_ident(dialect, namespace)}.{quote_ident(dialect, name)}"


def placeholder(dialect: str) -> str:
    return "?" if dialect == "sqlite" else "%s"
