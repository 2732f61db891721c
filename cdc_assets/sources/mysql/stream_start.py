"""Where a binlog stream opens: at the position's file/offset, or at its GTID set after a failover.

A position is a file/offset of one server (`MysqlPosition.server`) plus the GTID set logged there. On the same
server whose binlog still lists the file, the stream opens at file/offset. Otherwise (a failover to another
server, whose files are other files; or the file was purged) the GTID set is the only coordinate that means
the same everywhere: MySQL receives it as COM_BINLOG_DUMP_GTID's set (gtid_mode=ON), MariaDB as
@slave_connect_state (`d-s-n,...`, always there). The new server then sends the groups the set lacks, and
positions from there on are the new server's file/offsets (the reader never adopts the start-up ROTATE's
offset as a boundary in that mode: it is where the server looked, not where the set ends).

    same server (or unknown) and file listed --> by file/offset
    else, GTID set recorded                  --> by GTID set (the server refuses a purged set: PositionLost)
    else                                     --> PositionLost naming position, server and `plan --replan`
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pymysql

from cdc_assets.core import gtid_sets
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.mysql_flavour import MysqlFlavour, detect
from cdc_assets.errors import REPLAN_HINT, PositionLost

FIRST_EVENT_OFFSET = 4
# SHOW BINLOG EVENTS' Info of a MySQL GTID event (binlog_event.cpp Gtid_log_event::print / get_set_gtid_next).
_FILE_HEADER = ("Format_desc", "Previous_gtids")  # the events every MySQL binlog file opens with
_GTID_NEXT = re.compile(r"SET @@SESSION\.GTID_NEXT\s*=\s*'(?P<gtid>[^']+)'", re.I)


@dataclass(frozen=True)
class ServerState:
    """What a stream start depends on: the server's flavour, identity and binlog files."""

    flavour: MysqlFlavour
    identity: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class StreamStart:
    """How to open the stream: `auto_position` set means by GTID set, else by file/offset."""

    position: MysqlPosition
    auto_position: str | None = None

    @property
    def by_gtid(self) -> bool:
        return self.auto_position is not None


def read_state(conn) -> ServerState:
    flavour = detect(conn)
    with conn.cursor() as cur:
        cur.execute(flavour.server_identity_sql)
        identity = str(cur.fetchone()[0])
        cur.execute(flavour.binary_logs_sql)
        files = tuple(row[0] for row in cur.fetchall())
    return ServerState(flavour, identity, files)


def choose(start: MysqlPosition, state: ServerState, url: DbUrl) -> StreamStart:
    """See the module docstring. Raises PositionLost when neither file nor GTID set can reach `start`."""
    same_server = not start.server or start.server == state.identity
    if same_server and start.file in state.files:
        return StreamStart(start)
    if start.gtid_set:
        return StreamStart(start, start.gtid_set)
    if same_server:
        where = (f"the binlog from {start} was purged from {url} (or never existed: not in SHOW BINARY LOGS of "
                 f"server {state.identity})")
    else:
        where = f"{url} is server {state.identity}, not server {start.server} whose binlog holds {start}"
    raise PositionLost(f"{where}, and the position has no GTID set to find the same point elsewhere", REPLAN_HINT)


def resolved(start: MysqlPosition, state: ServerState, conn) -> MysqlPosition:
    """`start` with its server and GTID set filled in when it lies in this server's binlog and lacks them (a
    startup position, or one recorded before positions named their server, whose set may be one GTID rather
    than the set): the reader adds each group's GTID to it, so it must be the exact set at `start`."""
    if start.server and start.server != state.identity or start.file not in state.files:
        return start
    exact = start.gtid_set if start.server and start.gtid_set else gtid_set_at(conn, state.flavour, start.file, start.pos)
    return MysqlPosition(start.file, start.pos, exact, state.identity)


def gtid_set_at(conn, flavour: MysqlFlavour, file: str, pos: int) -> str:
    """The GTID set logged before offset `pos` of `file` ("" on a server without GTIDs)."""
    if flavour.mariadb:
        with conn.cursor() as cur:
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
            return (cur.fetchone()[0] or "")
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.gtid_mode")
        if str(cur.fetchone()[0]).upper() == "OFF":
            return ""  # no GTIDs: spare the scan below
    # Streamed: a file holds up to max_binlog_size of events. Read once per stream opened at a position without
    # a set (startup positions, old checkpoints); MySQL has no BINLOG_GTID_POS.
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute("SHOW BINLOG EVENTS IN %s", (file,))
        try:
            return gtids_before(cur, pos)
        finally:
            cur.fetchall()  # drain, so the connection stays usable


def gtids_before(rows, pos: int) -> str:
    """From SHOW BINLOG EVENTS rows (Log_name, Pos, Event_type, Server_id, End_log_pos, Info) of one MySQL
    file: its Previous_gtids set (the set before the file, wherever `pos` is) plus every Gtid event that starts
    before `pos`."""
    gtid_set = ""
    for _log, start, event_type, _server, _end, info in rows:
        if event_type in _FILE_HEADER:
            gtid_set = (info or "").replace("\n", "") if event_type == "Previous_gtids" else gtid_set
        elif start >= pos:
            break
        elif event_type == "Gtid" and (m := _GTID_NEXT.search(info or "")):
            gtid_set = gtid_sets.add(gtid_set, m["gtid"])
    return gtid_set
