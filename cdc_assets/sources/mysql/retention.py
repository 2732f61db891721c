"""Binlog retention headroom: the figures `core.headroom.binlog_headroom` decides on, read from the server."""
from __future__ import annotations

import os
import time

from cdc_assets.core import gtid_sets
from cdc_assets.core.headroom import BinlogFigures, Headroom, binlog_headroom
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.sources.mysql import capture, stream_start
from cdc_assets.sources.mysql.stream import default_server_id
from cdc_assets.sources.mysql.stream_start import FIRST_EVENT_OFFSET
from cdc_assets.sources.mysql.timestamps import file_created


def headroom(url: DbUrl, needed: MysqlPosition) -> Headroom:
    conn = connect(url, database="")
    try:
        state = stream_start.read_state(conn)
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN %s", (capture.VARIABLES,))
            variables = {k.lower(): v for k, v in cur.fetchall()}
        # Another server's file, or our own purged: the stream can still start by GTID set if that set holds
        # every GTID logged before the oldest retained file (stream_start.choose).
        listed = needed.same_server(MysqlPosition(needed.file, 0, "", state.identity)) and needed.file in state.files
        oldest = stream_start.resolved(MysqlPosition(state.files[0], FIRST_EVENT_OFFSET), state, conn)
        reachable = not listed and bool(needed.gtid_set) and gtid_sets.contains(needed.gtid_set, oldest.gtid_set)
    finally:
        conn.close()
    _, retention = capture.retention_of({k: "" if v is None else str(v) for k, v in variables.items()})
    files = state.files
    first = files[0] if reachable else needed.file if listed else None
    closed_age = None
    if first is not None and first != files[-1]:
        following = files[files.index(first) + 1]
        server_id = default_server_id(f"{url}#headroom#{os.getpid()}")
        closed_age = time.time() - file_created(url, server_id, following)
    return binlog_headroom(BinlogFigures(str(url), str(needed), needed.file, files, listed, retention, closed_age,
                                         reachable))
