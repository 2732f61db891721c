"""Open DBAPI connections to MySQL/MariaDB and PostgreSQL, with errors that never show a password.

Every session runs in UTC so temporal values mean the same thing on both sides. MySQL sessions are strict
whatever the server's sql_mode: a value a column cannot hold is an error, never clipped, truncated or zeroed.
"""
from __future__ import annotations

import pymysql
import psycopg2

from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import NETWORK_HINT, UnreachableError, scrub

STRICT_UTC_SESSION = "SET time_zone = '+00:00', sql_mode = CONCAT_WS(',', NULLIF(@@sql_mode, ''), 'STRICT_ALL_TABLES')"


def postgres_args(url: DbUrl, database: str | None = None) -> dict:
    """psycopg2.connect keywords: UTC, ISO dates. A plain dict, so Spark can ship it to Python workers."""
    return dict(host=url.host, port=url.port, user=url.user or None, password=url.password or None,
                dbname=(url.database if database is None else database) or "postgres", connect_timeout=10,
                options="-c TimeZone=UTC -c DateStyle=ISO")


def connect(url: DbUrl, database: str | None = None, *, autocommit: bool = True):
    db = url.database if database is None else database
    try:
        if url.db_type == "mysql":
            return pymysql.connect(
                host=url.host, port=url.port, user=url.user, password=url.password, database=db or None,
                autocommit=autocommit, charset="utf8mb4", local_infile=True, connect_timeout=10,
                init_command=STRICT_UTC_SESSION,
            )
        if url.db_type == "postgres":
            conn = psycopg2.connect(**postgres_args(url, db))
            conn.autocommit = autocommit
            return conn
    except (pymysql.err.OperationalError, psycopg2.OperationalError) as exc:
        reason = scrub(str(exc), url.password)
        raise UnreachableError(
            f"cannot connect to {url.with_database(db)}: {reason.strip().splitlines()[0]}", NETWORK_HINT,
        ) from None
    raise ValueError(f"no DBAPI connection for {url.db_type}")


def quote_ident(dialect: str, name: str) -> str:
    if dialect == "mysql":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def qualified(dialect: str, namespace: str, name: str) -> str:
    return f"{quote_ident(dialect, namespace)}.{quote_ident(dialect, name)}"


def placeholder(dialect: str) -> str:
    return "?" if dialect == "sqlite" else "%s"
