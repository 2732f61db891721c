"""The database's own message out of a DBAPI error, without the driver's decoration."""
from __future__ import annotations

import psycopg2
import pymysql

from cdc_assets.errors import scrub


def driver_message(exc: BaseException) -> str | None:
    """'Out of range value for column 'n' at row 77' for PyMySQL's (1264, "...") and psycopg2's primary message
    (with the column when the server names one); None for anything else."""
    if isinstance(exc, pymysql.err.MySQLError) and len(exc.args) == 2:
        return str(exc.args[1])
    if isinstance(exc, psycopg2.Error) and exc.diag.message_primary:
        column = exc.diag.column_name
        return exc.diag.message_primary + (f" (column {column})" if column else "")
    return None


DEADLOCK, LOCK_WAIT_TIMEOUT = "deadlock", "lock wait timeout"
_MYSQL_CONFLICTS = {1213: DEADLOCK, 1205: LOCK_WAIT_TIMEOUT}  # ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT
_POSTGRES_CONFLICTS = {"40P01": DEADLOCK, "55P03": LOCK_WAIT_TIMEOUT}  # deadlock_detected, lock_not_available


def lock_conflict(exc: BaseException) -> str | None:
    """DEADLOCK or LOCK_WAIT_TIMEOUT when the server refused a lock (its transaction is rolled back), else None."""
    if isinstance(exc, pymysql.err.MySQLError) and exc.args:
        return _MYSQL_CONFLICTS.get(exc.args[0])
    if isinstance(exc, psycopg2.Error):
        return _POSTGRES_CONFLICTS.get(exc.pgcode or "")
    return None


def first_line(exc: BaseException, secret: str = "") -> str:
    """The first line of a driver error (psycopg2 adds DETAIL/HINT lines), `secret` (a password) masked; the
    exception's class name when it has no text."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return scrub(text, secret)
