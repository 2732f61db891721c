"""LOAD DATA logged as a statement (binlog_format STATEMENT or MIXED): EXECUTE_LOAD_QUERY_EVENT, with its text.

python-mysql-replication 1.0.17 reads only this event's post-header, not the statement, so the reader could not
tell which table it loads. Wire format (MySQL internals manual, "EXECUTE_LOAD_QUERY_EVENT"; log_event.h
Execute_load_query_log_event): a QUERY_EVENT's post-header (thread id 4, exec time 4, schema length 1, error code 2,
status-vars length 2), then file id 4, filename start 4, filename end 4, duplicate handling 1; the body is a
QUERY_EVENT's: status vars, the schema and a NUL, the statement.
"""
from __future__ import annotations

from pymysqlreplication.constants import EXECUTE_LOAD_QUERY_EVENT
from pymysqlreplication.event import ExecuteLoadQueryEvent
from pymysqlreplication.packet import BinLogPacketWrapper

POST_HEADER_LENGTH = 13 + 13  # QUERY_EVENT's, then file id, filename start and end, duplicate handling


class LoadQueryEvent(ExecuteLoadQueryEvent):
    """The library's event, with `schema` (bytes, the default database) and `query` (str) read as QUERY_EVENT's."""

    def __init__(self, from_packet, event_size, table_map, ctl_connection, **kwargs):
        super().__init__(from_packet, event_size, table_map, ctl_connection, **kwargs)
        self.packet.advance(self.status_vars_length)
        self.schema = self.packet.read(self.schema_length)
        self.packet.advance(1)
        text = self.packet.read(event_size - POST_HEADER_LENGTH - self.status_vars_length - self.schema_length - 1)
        self.query = text.decode("utf-8", errors="replace")


BinLogPacketWrapper._BinLogPacketWrapper__event_map[EXECUTE_LOAD_QUERY_EVENT] = LoadQueryEvent  # type: ignore[attr-defined]
