"""The replication connection of one read of a logical replication slot: psycopg2's LogicalReplicationConnection
streaming the built-in `pgoutput` plugin (protocol v1) from a position, its messages and status updates, and what
its errors mean for the task."""
from __future__ import annotations

import psycopg2
import psycopg2.errors
from psycopg2.extras import LogicalReplicationConnection

from cdc_assets.core.positions import PgPosition
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.errors import first_line
from cdc_assets.errors import NETWORK_HINT, REPLAN_HINT, PositionLost, SourceSetupError, UnreachableError

STATUS_INTERVAL = 5  # seconds between psycopg2's automatic status updates; servers drop silent clients after
#                      wal_sender_timeout (60 s by default)
SESSION_OPTIONS = "-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=postgres"


class ReplicationConnection:
    """A replication connection to `url` for `slot` and `publication`, opened at once; `start` begins the
    stream. `cursor` is psycopg2's replication cursor (its `wal_end`, a file descriptor for select());
    `read_message` and `send_feedback` are the cursor's, with psycopg2's errors turned into ours."""

    def __init__(self, url: DbUrl, slot: str, publication: str) -> None:
        self.url = url
        self.slot = slot
        self.publication = publication
        try:
            self._conn = psycopg2.connect(
                host=url.host, port=url.port, user=url.user or None, password=url.password or None,
                dbname=url.database, connect_timeout=10, client_encoding="UTF8", options=SESSION_OPTIONS,
                connection_factory=LogicalReplicationConnection)
        except psycopg2.OperationalError as exc:
            raise UnreachableError(f"cannot open a replication connection to {url}: "
                                   f"{first_line(exc, url.password)}", NETWORK_HINT) from None
        self.cursor = None

    def start(self, start: PgPosition) -> None:
        cursor = self._conn.cursor()
        try:
            cursor.start_replication(
                slot_name=self.slot, decode=False, start_lsn=start.lsn, status_interval=STATUS_INTERVAL,
                options={"proto_version": "1", "publication_names": self.publication})
        except psycopg2.Error as exc:
            raise self._translate(exc) from None
        self.cursor = cursor

    def read_message(self):
        """The next message, or None when none has arrived (the cursor does not block)."""
        try:
            return self.cursor.read_message()
        except psycopg2.Error as exc:
            raise self._translate(exc) from None

    def send_feedback(self, **kwargs) -> None:
        try:
            self.cursor.send_feedback(**kwargs)
        except psycopg2.Error as exc:
            raise self._translate(exc) from None

    def close(self) -> None:
        self._conn.close()

    def _translate(self, exc: psycopg2.Error) -> Exception:
        reason = first_line(exc, self.url.password)
        if isinstance(exc, psycopg2.errors.UndefinedObject) and "publication" in reason:
            return PositionLost(
                f"publication {self.publication} is missing on {self.url} for the changes being decoded ({reason}); "
                "creating it now does not help: the server reads publications as of each change", REPLAN_HINT)
        if isinstance(exc, psycopg2.errors.UndefinedObject):
            return PositionLost(f"replication slot {self.slot} does not exist on {self.url} ({reason})", REPLAN_HINT)
        if isinstance(exc, psycopg2.errors.ObjectNotInPrerequisiteState) and "cannot read from" in reason:
            return PositionLost(f"replication slot {self.slot} on {self.url} was invalidated ({reason}): it held "
                                "back more WAL than max_slot_wal_keep_size allows", REPLAN_HINT)
        if isinstance(exc, psycopg2.errors.ObjectInUse):
            return SourceSetupError(f"replication slot {self.slot} on {self.url} is in use ({reason})",
                                    "stop the other reader of this slot (another incremental run of the task?)")
        if exc.pgcode is None or exc.pgcode[:2] in ("08", "57"):  # connection lost, server shutting down
            return UnreachableError(f"lost the replication connection to {self.url} ({reason})", NETWORK_HINT)
        return SourceSetupError(f"logical replication from slot {self.slot} on {self.url} failed ({reason})",
                                "check the slot, the publication and the server log")
