"""What the replication connection tells the server it has flushed: the checkpoint, never more.

psycopg2 moves the flush position it reports by itself (psycopg/pqpath.c, pq_read_replication_message): on a
keepalive, when the flush position last given to `send_feedback` is at or past the dataStart of the last XLogData
received, it takes the keepalive's walEnd as flushed ("the client already processed the last message"), and
reports it with its next status update. walEnd is past every transaction sent before the keepalive, so the slot
would then be confirmed past transactions the reader handed out and the target has not committed: after a crash
the server skips them.

For pgoutput that condition holds between transactions only when everything received was acknowledged (a
Commit's dataStart is its end). Inside a transaction it may hold anyway: a change's dataStart is its own LSN,
older than the commits of the transactions sent before it when the transactions overlapped in time, and a
Relation message's dataStart is 0 (written with last_write = false, walsender.c WalSndPrepareWrite). So:

- read (and so let psycopg2 handle keepalives) only while that condition is false, or while every transaction
  handed out was acknowledged: then walEnd is only past what the target holds and what was never sent;
- hold an acknowledgement back while sending it would make the condition true with transactions unacknowledged;
- while not reading, send status updates so that the server does not time the connection out
  (wal_sender_timeout): psycopg2 answers keepalives only while reading.
"""
from __future__ import annotations

import time
from collections.abc import Callable

STATUS_EVERY = 1.0  # seconds between status updates while the reader holds back


class Feedback:
    """The flush position reported on one replication cursor, for one reading thread. `send` is the cursor's
    send_feedback."""

    def __init__(self, send: Callable[..., None], start_lsn: int) -> None:
        self.send = send
        self.flushed = 0  # the largest flush_lsn given to send_feedback (psycopg2's explicitly_flushed_lsn)
        self.data_start = 0  # dataStart of the last XLogData received (psycopg2's last_msg_data_start)
        self.handed_out = 0  # the largest position handed to the consumer
        self.applied = start_lsn  # the target holds everything up to here
        self.pending: int | None = None  # an acknowledgement not sent yet
        self.status_at = time.monotonic()

    def received(self, data_start: int) -> None:
        self.data_start = data_start
        self._send()

    def handing_out(self, lsn: int) -> None:
        self.handed_out = max(self.handed_out, lsn)

    def acknowledge(self, lsn: int) -> None:
        """The target committed everything up to `lsn`."""
        self.applied = max(self.applied, lsn)
        self.pending = max(self.pending or 0, lsn)
        self._send()

    def may_read(self) -> bool:
        """Whether psycopg2 may handle the next keepalive: it then confirms nothing the target lacks."""
        return not self._forwards(self.flushed) or self.handed_out <= self.applied

    def hold_back(self) -> None:
        """Not reading: keep the connection alive with the position already reported."""
        if time.monotonic() - self.status_at >= STATUS_EVERY:
            self.send(force=True)
            self.status_at = time.monotonic()

    def _forwards(self, flushed: int) -> bool:
        """psycopg2's condition for taking a keepalive's walEnd as flushed."""
        return flushed >= self.data_start

    def _send(self) -> None:
        ack = self.pending
        if ack is None:
            return
        if self._forwards(ack) and not self._forwards(self.flushed) and self.handed_out > self.applied:
            return  # would let a keepalive confirm past what the target lacks: wait for a later message
        self.send(flush_lsn=ack, force=True)
        self.flushed, self.pending, self.status_at = max(self.flushed, ack), None, time.monotonic()
