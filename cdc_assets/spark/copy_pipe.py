"""One split from a PostgreSQL source into a PostgreSQL staging table, its rows never in a JVM: the source's
`COPY (SELECT ...) TO STDOUT` piped into the target's `COPY ... FROM STDIN`, inside one Spark task.

The source's COPY text is the staging table's COPY text (the source renders each field as the JDBC path's COPY
line does, core/boundary.CopyOutExport), or both are COPY's binary format, so the bytes pass through untouched: a
thread reads the source into chunks of about CHUNK_BYTES, a bounded queue hands them to the target's COPY (the read
waits when the write is behind). psycopg2 hands each source row to `write()` as one bytes object (binary: the
trailer too); nothing else is built per row. The rows copied are the target's count. Imports psycopg2 and
core/read_limit only: it runs in Python workers.
"""
from __future__ import annotations

import queue
import threading

from cdc_assets.core.read_limit import Pacer

CHUNK_BYTES = 1 << 20
DEPTH = 8  # chunks in flight between the source's read and the target's write
_END = object()


def pipe_split(source_args: dict, copy_out: str, target_args: dict, copy_in: str,
               pacer: Pacer | None = None, chunk_rows: int | None = None) -> int:
    """Run `copy_out` on the source into `copy_in` on the target, in one target transaction; the rows copied.
    With a `pacer`, paced after each chunk (of at most `chunk_rows` rows) by its rows and bytes."""
    import psycopg2

    chunks: queue.Queue = queue.Queue(DEPTH)
    stop = threading.Event()
    reader = threading.Thread(target=_read, args=(source_args, copy_out, chunks, stop, chunk_rows),
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


def _read(source_args: dict, copy_out: str, chunks: queue.Queue, stop: threading.Event,
          chunk_rows: int | None) -> None:
    import psycopg2

    out = _Writer(chunks, stop, chunk_rows)
    try:
        source = psycopg2.connect(**source_args)
        try:
            source.autocommit = True  # one statement: its own snapshot, as a JDBC partition's query
            with source.cursor() as cur:
                cur.copy_expert(copy_out, out)
        finally:
            source.close()
        out.flush()
        _put(chunks, stop, _END)
    except psycopg2.Error as exc:  # raised by the target's side, which then ends its COPY
        _put(chunks, stop, CopyOutFailed(f"{type(exc).__module__}.{type(exc).__name__}: {exc}".strip()))
    except BaseException as exc:
        _put(chunks, stop, exc)


class CopyOutFailed(Exception):
    """The source's `COPY ... TO` failed; the message is the driver's, with its type, for spark/errors.py."""


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
