"""One split from a PostgreSQL or MySQL source into a PostgreSQL staging table, its rows never in a JVM: the
source's rows as COPY text (or binary) piped into the target's `COPY ... FROM STDIN`, inside one Spark task.

A PostgreSQL source runs `COPY (SELECT ...) TO STDOUT`; a MySQL one a `SELECT` of one COPY line per row (the JDBC
path's line, core/boundary.CopyOutExport), read by the C client (mysqlclient's `_mysql`, which hands a batch of
rows as bytes, at a fraction of the CPU the JVM's JDBC read and Arrow conversion take: docs/benchmarks/snapshot.md). Either way the bytes pass through untouched: a thread
reads the source into chunks of about CHUNK_BYTES, a bounded queue hands them to the target's COPY (the read waits
when the write is behind). psycopg2 hands each source row to `write()` as one bytes object (binary: the trailer
too); nothing else is built per row. The rows copied are the target's count. Imports psycopg2, MySQLdb and
core/read_limit only: it runs in Python workers.
"""
from __future__ import annotations

import queue
import threading

from cdc_assets.core.read_limit import Pacer

CHUNK_BYTES = 1 << 20
FETCH_ROWS = 10_000  # a MySQL source's rows per fetch, one chunk each (~1 MB of bench rows)
DEPTH = 8  # chunks in flight between the source's read and the target's write
_END = object()


def pipe_split(source_args: dict, copy_out: str, target_args: dict, copy_in: str,
               pacer: Pacer | None = None, chunk_rows: int | None = None, client: str = "postgres") -> int:
    """Run `copy_out` on the source (`client`: "postgres" or "mysql") into `copy_in` on the target, in one target
    transaction; the rows copied. With a `pacer`, paced after each chunk (of at most `chunk_rows` rows) by its rows
    and bytes."""
    import psycopg2

    chunks: queue.Queue = queue.Queue(DEPTH)
    stop = threading.Event()
    read = _select_lines if client == "mysql" else _copy_out
    reader = threading.Thread(target=_read, args=(read, source_args, copy_out, chunks, stop, chunk_rows),
                              name="copy-out", daemon=True)
    target = psycopg2.connect(**target_args)
    into = _Chunks(chunks, pacer)
    reader.start()
    try:
        try:
            with target, target.cursor() as cur:
                cur.copy_expert(copy_in, into)
                rows = cur.rowcount
        except Exception:
            if into.error is None:
                raise
        if into.error is not None:  # the source's error, not the COPY it aborted
            raise into.error from None
    finally:
        stop.set()
        _drain(chunks)
        reader.join()
        target.close()
    return rows


def _read(read, source_args: dict, statement: str, chunks: queue.Queue, stop: threading.Event,
          chunk_rows: int | None) -> None:
    out = _Writer(chunks, stop, chunk_rows)
    try:
        read(source_args, statement, out)
        out.flush()
        _put(chunks, stop, _END)
    except _Stopped:  # the target's side failed first and raises its own error
        return
    except BaseException as exc:
        try:
            _put(chunks, stop, exc)
        except _Stopped:
            return


def _copy_out(source_args: dict, statement: str, out: "_Writer") -> None:
    import psycopg2

    try:
        source = psycopg2.connect(**source_args)
        try:
            source.autocommit = True  # one statement: its own snapshot, as a JDBC partition's query
            with source.cursor() as cur:
                cur.copy_expert(statement, out)
        finally:
            source.close()
    except psycopg2.Error as exc:  # the source's: the target's side raises it once its COPY has ended
        raise CopyOutFailed(f"{type(exc).__module__}.{type(exc).__name__}: {exc}".strip()) from None


def _select_lines(source_args: dict, statement: str, out: "_Writer") -> None:
    """Unbuffered (`use_result`): the server streams the rows as the target takes them."""
    from MySQLdb import _mysql

    batch = min(out.chunk_rows or FETCH_ROWS, FETCH_ROWS)
    try:
        source = _mysql.connect(**source_args)
        try:
            source.query(statement)
            result = source.use_result()
            while rows := result.fetch_row(maxrows=batch):
                try:
                    data = b"\n".join([row[0] for row in rows])
                except TypeError:  # a NULL line
                    raise CopyOutFailed(f"MySQLdb.DataError: {LINE_TOO_LONG}") from None
                out.put(data + b"\n", len(rows))
        finally:
            source.close()
    except _mysql.MySQLError as exc:
        code, message = exc.args if len(exc.args) == 2 else ("", str(exc))
        raise CopyOutFailed(f"MySQLdb.{type(exc).__name__}: {message} ({code})") from None


# MariaDB's CONCAT_WS gives NULL, with a warning only, for a result longer than max_allowed_packet (the JDBC path
# meets the same NULL line: spark/staging.copy_payload).
LINE_TOO_LONG = ("a row of this split, as one COPY line, is longer than the source's max_allowed_packet, and the "
                 "source returned NULL for it: raise max_allowed_packet on the source (SET GLOBAL "
                 "max_allowed_packet = 1073741824) and materialize the split again")


class CopyOutFailed(Exception):
    """The source's read failed; the message is the driver's, with its type, for spark/errors.py."""


class _Stopped(Exception):
    """The target's side ended first (failed): the source's read stops at its next row."""


class _Writer:
    """The file the source's `copy_expert` writes, a row at a time: chunks of about CHUNK_BYTES into the queue."""

    def __init__(self, chunks: queue.Queue, stop: threading.Event, chunk_rows: int | None) -> None:
        self.chunks, self.stop, self.chunk_rows = chunks, stop, chunk_rows
        self.parts: list[bytes] = []
        self.size = 0

    def write(self, data) -> None:
        self.parts.append(data)
        self.size += len(data)
        if self.size >= CHUNK_BYTES or (self.chunk_rows is not None and len(self.parts) >= self.chunk_rows):
            self.flush()

    def put(self, data: bytes, rows: int) -> None:
        """A chunk the source's client made whole."""
        self.flush()
        _put(self.chunks, self.stop, (data, rows))

    def flush(self) -> None:
        if self.parts:
            chunk, self.parts, self.size = (b"".join(self.parts), len(self.parts)), [], 0
            _put(self.chunks, self.stop, chunk)


def _put(chunks: queue.Queue, stop: threading.Event, item) -> None:
    while True:
        if stop.is_set():
            raise _Stopped()
        try:
            chunks.put(item, timeout=0.1)
            return
        except queue.Full:
            continue


def _drain(chunks: queue.Queue) -> None:
    while True:
        try:
            chunks.get_nowait()
        except queue.Empty:
            return


class _Chunks:
    """The file the target's `copy_expert` reads: the source's chunks as they come. A source error ends the COPY
    early and is kept in `error`, for the caller to raise once the target rolled back."""

    def __init__(self, chunks: queue.Queue, pacer: Pacer | None) -> None:
        self.chunks, self.pacer = chunks, pacer
        self.error: BaseException | None = None

    def read(self, size: int = -1) -> bytes:
        item = self.chunks.get()
        if item is _END:
            return b""
        if isinstance(item, BaseException):
            self.error = item
            raise item
        data, rows = item
        if self.pacer is not None:
            self.pacer.pace(rows, len(data))
        return data
