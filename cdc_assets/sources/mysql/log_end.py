"""The binlog's end: its file/offset and the GTID set logged up to exactly there, read cheaply.

MySQL names both in one statement (SHOW BINARY LOG STATUS's Executed_Gtid_Set). MariaDB's status has no GTID
column, and BINLOG_GTID_POS(file, offset) finds the set by scanning the file from its start: 0.36-0.45 ms of the
server's CPU per MB of the current file (bench/log_end.py), on every watermark, sensor check and verification
window. Instead the offset is read between two reads of @@gtid_binlog_pos. MariaDB updates that state while it
writes a group's events under the binlog's lock, which SHOW MASTER STATUS waits for: when both reads agree, no
group was written between them, and the set is the one at the offset (under saturated writes every bracket that
held matched BINLOG_GTID_POS; reading the state once, after the status, gave a set too large in 44% of reads,
which a resume by GTID would skip). A bracket a commit crossed is read again; after BRACKET_READS of them the
scan decides.

    gtid_binlog_pos  -> a
    SHOW MASTER STATUS -> file, offset
    gtid_binlog_pos  -> b        a == b: (file, offset, a)     else again, then BINLOG_GTID_POS(file, offset)
"""
from __future__ import annotations

from cdc_assets.dbapi.mysql_flavour import MysqlFlavour
from cdc_assets.sources.mysql.stream_start import gtid_set_at

BRACKET_READS = 5  # with sysbench saturating the server (16 threads), one bracket in five held
GTID_STATE_SQL = "SELECT @@GLOBAL.gtid_binlog_pos"


def log_end(cur, flavour: MysqlFlavour) -> tuple[str, int, str] | None:
    """(file, offset, GTID set) of the binlog's end; None when the server logs no binlog."""
    if not flavour.mariadb:
        row = _status(cur, flavour)
        return None if row is None else (row[0], int(row[1]), (row[4] if len(row) > 4 else "") or "")
    row = None
    for _ in range(BRACKET_READS):
        before = _gtid_state(cur)
        row = _status(cur, flavour)
        if row is None:
            return None
        if _gtid_state(cur) == before:
            return row[0], int(row[1]), before
    row = row or _status(cur, flavour)
    if row is None:
        return None
    return row[0], int(row[1]), gtid_set_at(cur.connection, flavour, row[0], int(row[1]))


def _status(cur, flavour: MysqlFlavour) -> tuple | None:
    cur.execute(flavour.binlog_status_sql)
    return cur.fetchone()


def _gtid_state(cur) -> str:
    cur.execute(GTID_STATE_SQL)
    return cur.fetchone()[0] or ""
