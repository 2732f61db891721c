"""Telling a target that failed (its server or connection) from a change it refused or a bug: with several
targets, only the first may leave a run that the commit policy lets go on without it."""
from __future__ import annotations

from typing import Any, Callable, TypeVar

from cdc_assets.core.urls import mask
from cdc_assets.errors import NETWORK_HINT, CdcError, UnreachableError

_DRIVERS = ("psycopg2", "pymysql", "pymongo", "MySQLdb")
T = TypeVar("T")
# Server shutdown, connection killed, lock wait timeout, deadlock, a table's definition changed after the
# transaction read (an operator's ALTER or OPTIMIZE of a target table: the server asks to retry); cannot connect,
# server gone, lost during a query, lost while reading, disconnected for inactivity.
MYSQL_LOST = frozenset({1053, 1927, 1205, 1213, 1412, 2003, 2006, 2013, 2055, 4031})


def target_down(exc: BaseException) -> bool:
    if isinstance(exc, UnreachableError):
        return True
    if isinstance(exc, CdcError):
        return False
    if isinstance(exc, OSError):
        return True
    # A Spark job that failed wraps the driver's error in Py4J's or Spark's own: judged by its text.
    text = str(exc)
    return type(exc).__module__.split(".")[0] in _DRIVERS or any(
        marker in text for marker in ("Connection refused", "connection to server", "Communications link failure",
                                      "server closed the connection", "Could not connect", "Connection reset"))


def connection_lost(exc: BaseException) -> UnreachableError | None:
    """A driver's error for a session the server ended or a connection that broke, as the UnreachableError the sync
    retries; None for any other error (a change refused, a bug). PyMySQL and MySQLdb raise most server errors as
    OperationalError: for them only the codes in MYSQL_LOST count."""
    driver = type(exc).__module__.split(".")[0]
    names = {c.__name__ for c in type(exc).__mro__}
    if isinstance(exc, (ConnectionError, TimeoutError)) or "InterfaceError" in names and driver in _DRIVERS:
        broken = True
    elif driver in ("pymysql", "MySQLdb"):
        broken = "OperationalError" in names and bool(exc.args) and exc.args[0] in MYSQL_LOST
    else:
        broken = driver == "psycopg2" and "OperationalError" in names
    return UnreachableError(f"lost a connection: {one_line(exc)}", NETWORK_HINT) if broken else None


def one_line(exc: BaseException) -> str:
    """The error's first line, passwords masked: for logs, records and Dagster metadata."""
    text = str(exc).strip().splitlines()
    return mask(text[0] if text else type(exc).__name__)


def answering(lanes: list, read: Callable[[Any], T]) -> tuple[dict[str, T], dict[str, str]]:
    """`read(lane)` of each target, by name, and why each one that is down was left out (its connections closed).
    With one target, its failure is raised as it is."""
    found: dict[str, T] = {}
    down: dict[str, str] = {}
    for lane in lanes:
        try:
            found[lane.name] = read(lane)
        except Exception as exc:
            if len(lanes) == 1 or not target_down(exc):
                raise
            down[lane.name] = one_line(exc)
            lane.reconnect_target()
    return found, down
