"""A failure inside a Spark job, told in one line: the database's own message and where it happened.

Spark wraps a worker's error twice (a Python worker's traceback inside a Py4J error inside a PySpark exception)
and a JDBC driver's inside a Java stack of a hundred lines; the line a person needs is in there once.
"""
from __future__ import annotations

import re

from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.dbapi.errors import driver_message
from cdc_assets.dbapi.mysql_login import SPARK_JDBC, refusal_hint, refused
from cdc_assets.errors import NETWORK_HINT, LoginError, UnreachableError

# The database's message as the drivers word it: psycopg2 in a Python worker; JDBC drivers in the JVM.
# spark/copy_pipe.py: a source's read (PostgreSQL's COPY TO, MySQL's SELECT) failed and aborted the staging COPY.
_COPY_OUT_ERROR = re.compile(r"CopyOutFailed: (?:psycopg2\.(?:errors\.)?\w+|(?P<mysql>MySQLdb)\.\w+): (?P<message>.+)$",
                             re.M)
_PYTHON_DB_ERROR = re.compile(r"^(?:psycopg2\.(?:errors\.)?\w+|pymysql\.err\.\w+): (?P<message>.+)$", re.M)
_JAVA_DB_ERROR = re.compile(
    r"(?:java\.sql\.\w+|org\.postgresql\.util\.PSQLException|org\.mariadb\.jdbc\.[\w.]+|com\.mysql\.[\w.]+): "
    r"(?P<message>[^\n]+)")
_PG_COPY_COLUMN = re.compile(r"CONTEXT:\s+COPY \S+, line \d+, column (?P<column>[^:\s]+):")
_PG_CONTEXT = re.compile(r"\nCONTEXT:.*", re.S)
_CONNECTION_TAG = re.compile(r"^\(conn[=:]\d+\)\s*")
# How Connector/J 2.7 words a connection it could not open, whatever the cause (refused login, TLS, no answer).
_JDBC_CONNECT = re.compile(r"Could not connect to address=\(host=[^)]*\)\(port=\d+\)[^:]*: (?P<reason>[^\n]+)")
_PYTHON_ERROR = re.compile(r"^(?P<type>\w+(?:Error|Exception)): (?P<message>.+)$", re.M)
MAX_LINE = 400


def root_cause(exc: BaseException, where: str = "in Spark") -> tuple[str, str]:
    """(the database's message with the column when known, where it happened); `where` for errors raised on the
    driver's own connections."""
    text = str(exc)
    if (message := driver_message(exc)) is not None:
        pass
    elif m := _COPY_OUT_ERROR.search(text):
        statement = "SELECT" if m.group("mysql") else "COPY TO"
        message, where = m.group("message"), f"in a Spark Python worker reading the source ({statement})"
    elif m := _PYTHON_DB_ERROR.search(text):
        message, where = m.group("message"), "in a Spark Python worker writing the staging table (COPY)"
        if c := _PG_COPY_COLUMN.search(text):
            message += f" (column {c.group('column')})"
    elif m := _JDBC_CONNECT.search(_with_jvm_trace(exc)):
        reason = _CONNECTION_TAG.sub("", m.group("reason")).strip()
        message, where = f"{reason} ({refusal_hint(reason) or NETWORK_HINT})", f"connecting over {SPARK_JDBC}"
    elif m := _JAVA_DB_ERROR.search(text):
        message, where = _CONNECTION_TAG.sub("", m.group("message")), "in a Spark JDBC task"
    elif found := _PYTHON_ERROR.findall(text):
        message, where = f"{found[-1][0]}: {found[-1][1]}", "in a Spark Python worker"
    else:
        message = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    message = _PG_CONTEXT.sub("", message).strip()
    return (message[:MAX_LINE] + "…" if len(message) > MAX_LINE else message), where


def jdbc_connect_failure(exc: BaseException, endpoint: JdbcEndpoint) -> LoginError | UnreachableError | None:
    """Connector/J could not open `endpoint`: which connection, why, and the way out; None for any other error."""
    m = _JDBC_CONNECT.search(_with_jvm_trace(exc))
    if m is None:
        return None
    return refused(SPARK_JDBC, endpoint.name, _CONNECTION_TAG.sub("", m.group("reason")), endpoint.password)


def _with_jvm_trace(exc: BaseException) -> str:
    """The error's text and, for PySpark's captured errors, the JVM trace behind it: Spark 4 words a JDBC connection
    it could not open as "[FAILED_JDBC.CONNECTION] ... Couldn't connect to the database" and keeps the driver's
    reason in the trace's "Caused by:" lines only (CapturedException keeps that trace in `_stackTrace`)."""
    trace = getattr(exc, "_stackTrace", None)
    return f"{exc}\n{trace}" if isinstance(trace, str) else str(exc)
