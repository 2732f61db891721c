"""The binlog stream: opening it (by file/offset or GTID set), fetching events, and the server's errors
translated into ours.

We stream by file/offset with `is_mariadb=False` even on MariaDB: with `is_mariadb=True` and no GTID the
library ignores log_file/log_pos and replays from the first binlog (python-mysql-replication 1.0,
`BinLogStreamReader.__set_mariadb_settings`: COM_BINLOG_DUMP with offset 4 and an empty file name).
"""
from __future__ import annotations

import hashlib
from collections.abc import Collection

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (GtidEvent, HeartbeatLogEvent, MariadbGtidEvent, QueryEvent, RotateEvent,
                                      XAPrepareEvent, XidEvent)
from pymysqlreplication.row_event import DeleteRowsEvent, PartialUpdateRowsEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import MysqlConnection, connect
from cdc_assets.dbapi.mysql_login import REPLICATION, MysqlLogin, refused
from cdc_assets.errors import (NETWORK_HINT, REPLAN_HINT, LoginError, PositionLost, SourceSetupError, UnreachableError,
                               scrub)
from cdc_assets.sources.mysql.load_query import LoadQueryEvent
from cdc_assets.sources.mysql.stream_start import StreamStart
from cdc_assets.sources.mysql.transaction_payload import TransactionPayloadEvent

HEARTBEAT_PERIOD = 0.5  # seconds: an idle server sends HEARTBEAT_LOG_EVENT this often on a blocking stream
READ_TIMEOUT = 30  # seconds of silence (no event, no heartbeat) before the connection counts as lost
SERVER_ID_MIN = 1000  # ids below are left to hand-configured replicas
SERVER_ID_SPAN = 2**31 - SERVER_ID_MIN

ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
ER_ACCESS_DENIED_LOGIN = 1045
ER_MISSING_PRIVILEGE = {1044, 1227}  # database access, REPLICATION SLAVE / BINLOG MONITOR
CLIENT_ERRORS = range(2000, 3000)  # CR_*: connection refused, unknown host, lost during connect ...
PURGED = "Could not find first log file name"

# TransactionPayloadEvent: MySQL's compressed transactions, whose inner events the reader takes in turn;
# LoadQueryEvent: a LOAD DATA logged as a statement, which stops the reader on a captured table.
READER_EVENTS = [WriteRowsEvent, UpdateRowsEvent, PartialUpdateRowsEvent, DeleteRowsEvent, XidEvent, QueryEvent,
                 RotateEvent, GtidEvent, MariadbGtidEvent, HeartbeatLogEvent, XAPrepareEvent, TransactionPayloadEvent,
                 LoadQueryEvent]
BOUNDARY_EVENTS = [XidEvent, QueryEvent, RotateEvent, GtidEvent, MariadbGtidEvent, XAPrepareEvent,
                   TransactionPayloadEvent]


def default_server_id(task_id: str) -> int:
    """A stable replica server_id for a task: every connected replica needs its own, or the server drops the
    older connection of two with the same id."""
    digest = hashlib.sha256(task_id.encode()).digest()
    return SERVER_ID_MIN + int.from_bytes(digest[:8], "big") % SERVER_ID_SPAN


def open_stream(url: DbUrl, server_id: int, start: MysqlPosition | StreamStart, events: list,
                tables: Collection[TableId], blocking: bool = False, mariadb: bool = False) -> BinLogStreamReader:
    """A non-blocking stream ends once caught up; a blocking one waits for more, and hands control back at
    each heartbeat so that the reader can yield Idle and notice close(). Waiting on heartbeats beats
    reopening a non-blocking stream in a loop: each open costs two connections.

    By file/offset the library must be told MySQL even on MariaDB (it ignores the file otherwise); by GTID
    set it must be told the flavour: MariaDB takes the set as @slave_connect_state, MySQL in the dump packet."""
    begin = start if isinstance(start, StreamStart) else StreamStart(start)
    where = dict(auto_position=begin.auto_position, is_mariadb=mariadb) if begin.by_gtid else dict(
        log_file=begin.position.file, log_pos=begin.position.pos, resume_stream=True, is_mariadb=False)
    return BinLogStreamReader(
        connection_settings=replication_settings(url),
        server_id=server_id, blocking=blocking, slave_heartbeat=HEARTBEAT_PERIOD if blocking else None,
        only_events=events, only_schemas=sorted({t.namespace for t in tables}),
        only_tables=sorted({t.name for t in tables}), enable_logging=False, pymysql_wrapper=MysqlConnection,
        **where)


def replication_settings(url: DbUrl) -> dict:
    """pymysql.connect keywords of the replication connection (and of the library's control connection): the
    same TLS and RSA key exchange as every other connection to the server (dbapi/mysql_login.py)."""
    return {"host": url.host, "port": url.port, "user": url.user, "password": url.password,
            "connect_timeout": 10, "read_timeout": READ_TIMEOUT, **MysqlLogin.from_url(url).pymysql_args()}


def fetch(stream: BinLogStreamReader, url: DbUrl, start: MysqlPosition | StreamStart):
    """The next event, None once a non-blocking stream caught up; the server's refusals as our errors.

    None also comes, as the same EOF packet, when the server ended the dump thread (KILL QUERY): a read that must
    reach a given position checks that it did, and reopens at its last boundary otherwise (prepared_xa.py). The
    reader's own stream reopens anyway, and the timestamp search can only answer too early a position (a replay)."""
    try:
        return stream.fetchone()
    except pymysql.err.MySQLError as exc:
        raise _translate(exc, url, start) from None


def _translate(exc: pymysql.err.MySQLError, url: DbUrl, start: MysqlPosition | StreamStart) -> Exception:
    code = exc.args[0] if exc.args else None
    reason = scrub(str(exc.args[1] if len(exc.args) > 1 else exc), url.password)
    if isinstance(start, StreamStart):
        if code == ER_MASTER_FATAL_ERROR_READING_BINLOG and start.by_gtid:
            return PositionLost(f"cannot resume the binlog of {url} at {start.position}: its file/offset belong to "
                                f"another server or are gone, and the server cannot start from GTID set "
                                f"{start.auto_position}: {reason}", REPLAN_HINT)
        start = start.position
    if code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
        if PURGED in reason:
            return PositionLost(f"the binlog from {start} was purged from {url} (or never existed)", REPLAN_HINT)
        return PositionLost(f"cannot read the binlog of {url} from {start}: {reason}", REPLAN_HINT)
    if code == ER_ACCESS_DENIED_LOGIN or (isinstance(code, str) and ("auth" in code or "sha2" in code)):
        return refused(REPLICATION, url, reason)  # PyMySQL words its own auth failures without a code
    if code in ER_MISSING_PRIVILEGE:
        return SourceSetupError(f"user '{url.user}' may not read the binlog of {url}: {reason}",
                                "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* to that user")
    if code in CLIENT_ERRORS:  # TLS refused, or no answer
        failure = refused(REPLICATION, url, reason)
        return failure if isinstance(failure, LoginError) else UnreachableError(
            f"cannot reach the binlog of {url} over {REPLICATION}: {reason}", NETWORK_HINT)
    return exc


def binary_logs(url: DbUrl) -> list[str]:
    """The server's binlog files, oldest first (SHOW BINARY LOGS)."""
    conn = connect(url, database="")
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            files = [row[0] for row in cur.fetchall()]
    finally:
        conn.close()
    if not files:
        raise SourceSetupError(f"SHOW BINARY LOGS lists no file on {url}", "start the server with --log-bin")
    return files
