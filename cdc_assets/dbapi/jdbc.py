"""JDBC endpoints for Spark, built from our URLs. Driver jars come from Debian packages (spark.jars)."""
from __future__ import annotations

from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.mysql_login import MysqlLogin

# MySQL sessions: UTC for TIMESTAMP text, and backslash escapes on, which our key literals rely on.
MYSQL_SESSION_INIT = "SET time_zone = '+00:00', sql_mode = REPLACE(@@sql_mode, 'NO_BACKSLASH_ESCAPES', '')"


def mysql_jdbc(url: DbUrl, database: str = "", write: bool = False) -> JdbcEndpoint:
    # jdbc:mysql:// makes Spark pick its MySQL dialect (backtick quoting); plain jdbc:mariadb:// breaks it.
    # tinyInt1isBit=false keeps TINYINT(1) an integer, so the value 2 survives. TLS and the RSA key exchange
    # (mysql_login) go in as properties: Spark hands every option it does not know itself to the driver.
    params = "tinyInt1isBit=false&useUnicode=true&characterEncoding=utf8"
    if write:
        params += "&rewriteBatchedStatements=true"
    return JdbcEndpoint(
        url=f"jdbc:mysql://{url.host}:{url.port}/{database}?{params}",
        driver="org.mariadb.jdbc.Driver", user=url.user, password=url.password,
        options=(("sessionInitStatement", MYSQL_SESSION_INIT), *MysqlLogin.from_url(url).jdbc_properties()),
        name=str(url.with_database(database)),
    )


def postgres_jdbc(url: DbUrl, write: bool = False) -> JdbcEndpoint:
    params = "reWriteBatchedInserts=true&" if write else ""
    # stringtype=unspecified lets the server type text parameters (into json, uuid, ... columns).
    return JdbcEndpoint(
        url=f"jdbc:postgresql://{url.host}:{url.port}/{url.database or 'postgres'}?{params}stringtype=unspecified",
        driver="org.postgresql.Driver", user=url.user, password=url.password, name=str(url),
    )


def jdbc_for(url: DbUrl, write: bool = False) -> JdbcEndpoint:
    return mysql_jdbc(url, "", write) if url.db_type == "mysql" else postgres_jdbc(url, write)
