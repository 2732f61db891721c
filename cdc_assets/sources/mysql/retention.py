"""Binlog retention headroom: the figures `core.headroom.binlog_headroom` decides on, read from the server."""
from __future__ import annotations

import os
import time

from cdc_assets.core.headroom import BinlogFigures, Headroom, Level, binlog_headroom
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.sources.mysql import capture, stream_start
from cdc_assets.sources.mysql.stream import default_server_id
from cdc_assets.sources.mysql.timestamps import file_created


def headroom(url: DbUrl, needed: MysqlPosition) -> Headroom:
    conn = connect(url, database="")
    try:
        state = stream_start.read_state(conn)
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN %s", (capture.VARIABLES,))
            variables = {k.lower(): v for k, v in cur.fetchall()}
    finally:
        conn.close()
    if needed.server and state.identity and needed.server != state.identity:
        # After a failover the stream reopens by GTID set: files of another server say nothing here.
        return Headroom(Level.OK, f"position {needed} is of another server than {url}: it resumes by GTID set, "
                        "whose retention shows at the next checkpoint")
    _, retention = capture.retention_of({k: "" if v is None else str(v) for k, v in variables.items()})
    files = state.files
    closed_age = None
    if needed.file in files and needed.file != files[-1]:
        following = files[files.index(needed.file) + 1]
        server_id = default_server_id(f"{url}#headroom#{os.getpid()}")
        closed_age = time.time() - file_created(url, server_id, following)
    return binlog_headroom(BinlogFigures(str(url), str(needed), needed.file, files, retention, closed_age))
