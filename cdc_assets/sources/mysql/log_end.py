"""The binlog's end: its file/offset and the GTID set logged up to exactly there, read cheaply.

MySQL names both in one statement (SHOW BINARY LOG STATUS's Executed_Gtid_Set). MariaDB's status has no GTID
column, and BINLOG_GTID_POS(file, offset) finds the set by scanning the file from its start: about 0.45 ms per MB
of the current file, so 200 ms at 450 MB, on every watermark, check and window. Instead the offset is read
between two reads of @@gtid_binlog_pos. MariaDB updates that state while it writes the group's events to the
binlog, under the binlog's lock, which SHOW MASTER STATUS takes too: when both reads agree, no group was written
between them, so the set is exactly the one at the offset. When they differ (a group was written meanwhile), the
bracket is read again; after BRACKET_READS that each saw a write, the scan decides.

    gtid_binlog_pos  -> a
    SHOW MASTER STATUS -> file, offset
    gtid_binlog_pos  -> b        a == b: (file, offset, a)     else again, then BINLOG_GTID_POS(file, offset)
"""
from __future__ import annotations

from cdc_assets.dbapi.mysql_flavour import MysqlFlavour

BRACKET_READS = 5  # at a steady few thousand commits a second, a bracket holds about one time in three
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
    cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (row[0], int(row[1])))
    return row[0], int(row[1]), cur.fetchone()[0] or ""


def _status(cur, flavour: MysqlFlavour) -> tuple | None:
    cur.execute(flavour.binlog_status_sql)
    return cur.fetchone()


def _gtid_state(cur) -> str:
    cur.execute(GTID_STATE_SQL)
    return cur.fetchone()[0] or ""
