"""startup_mode=timestamp: the binlog position at a point in time."""
from __future__ import annotations

import os

from pymysqlreplication.event import FormatDescriptionEvent

from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.errors import REPLAN_HINT, PositionLost
from cdc_assets.sources.mysql import stream_start
from cdc_assets.sources.mysql.assembly import Assembler
from cdc_assets.sources.mysql.stream import BOUNDARY_EVENTS, binary_logs, default_server_id, fetch, open_stream
from cdc_assets.sources.mysql.stream_start import FIRST_EVENT_OFFSET


def find_position_at(url: DbUrl, timestamp: float, server_id: int | None = None) -> MysqlPosition:
    """The boundary just before the first group (transaction or DDL) logged at or after `timestamp`.

    Binlog timestamps are whole seconds, so groups in the second of `timestamp` count as after it: starting
    a little early only replays changes. Files are binary-searched by creation time (their
    FORMAT_DESCRIPTION_EVENT): every group of earlier files was logged before a file was created. Before the
    oldest retained file the search starts at its beginning, like Flink CDC's timestamp startup."""
    server_id = server_id or default_server_id(f"{url}#find_position_at#{os.getpid()}")
    since = int(timestamp)
    files = binary_logs(url)
    lo, hi = 0, len(files) - 1
    while lo < hi:  # the last file created before `since`
        mid = (lo + hi + 1) // 2
        if file_created(url, server_id, files[mid]) < since:
            lo = mid
        else:
            hi = mid - 1
    found = _first_boundary_since(url, server_id, MysqlPosition(files[lo], FIRST_EVENT_OFFSET), since)
    conn = connect(url, database="")
    try:  # compared with positions of other servers later on: it names its server and GTID set
        return stream_start.resolved(found, stream_start.read_state(conn), conn)
    finally:
        conn.close()


def file_created(url: DbUrl, server_id: int, file: str) -> int:
    start = MysqlPosition(file, FIRST_EVENT_OFFSET)
    stream = open_stream(url, server_id, start, [FormatDescriptionEvent], ())
    try:
        event = fetch(stream, url, start)
    finally:
        stream.close()
    if event is None:
        raise PositionLost(f"the binlog {file} on {url} has no format description event", REPLAN_HINT)
    return event.timestamp


def _first_boundary_since(url: DbUrl, server_id: int, start: MysqlPosition, since: int) -> MysqlPosition:
    asm = Assembler(start, {}, str(url))
    stream = open_stream(url, server_id, start, BOUNDARY_EVENTS, ())
    try:
        while (event := fetch(stream, url, start)) is not None:
            before = asm.boundary
            if asm.feed(event) is not None and event.timestamp >= since:
                return before
        asm.caught_up(stream.log_file, stream.log_pos)
        return asm.boundary
    finally:
        stream.close()
