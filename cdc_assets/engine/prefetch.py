"""Read the log on its own thread while the driver applies: decoding (Python) overlaps the target's work
(waiting on a socket), and the bounded queue keeps memory flat when the target is slower than the log: it holds
at most QUEUE_ITEMS items and QUEUE_CHANGES row changes (64 transactions of 10,000 changes would be too many),
though always one item, whatever its size. `drained` tells the driver whether the reader has nothing to hand out
right now, so that a batch can end there instead of waiting for more."""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

QUEUE_ITEMS = 64  # transactions, parts (or idles) read ahead
QUEUE_CHANGES = 20_000  # row changes read ahead
_END = object()


class prefetch:
    def __init__(self, items: Iterator, close_source: Callable[[], None]) -> None:
        self._queue: queue.Queue = queue.Queue(QUEUE_ITEMS)
        self._room = threading.Condition()
        self._queued_changes = 0
        self._closing = threading.Event()
        self._close_source = close_source
        self._next = None  # an item `drained` took from the queue: the next one handed out
        self._thread = threading.Thread(target=self._run, args=(items,), name="cdc-log-reader", daemon=True)
        self._thread.start()

    def _run(self, items: Iterator) -> None:
        try:
            for item in items:
                if not self._put(item):
                    break
        except BaseException as exc:  # handed to the consumer, raised on its thread
            self._put(_Failure(exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
            self._put(_END)

    def _put(self, item) -> bool:
        size = _changes(item)
        with self._room:
            while self._queued_changes and self._queued_changes + size > QUEUE_CHANGES:
                if self._closing.is_set():
                    return False
                self._room.wait(0.2)
            self._queued_changes += size
        while not self._closing.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self):
        return self

    def __next__(self):
        item, self._next = self._next if self._next is not None else self._queue.get(), None
        if size := _changes(item):
            with self._room:
                self._queued_changes -= size
                self._room.notify()
        if item is _END:
            raise StopIteration
        if isinstance(item, _Failure):
            raise item.exc
        return item

    def drained(self, wait: float = 0.0) -> bool:
        """Whether the reader has nothing to hand out, even after waiting up to `wait` seconds for its next item
        (which is then the next one `__next__` returns)."""
        if self._next is None:
            try:
                self._next = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
            except queue.Empty:
                return True
        return False

    def close(self) -> None:
        self._closing.set()
        self._close_source()
        self._thread.join(timeout=30)


def _changes(item) -> int:
    return len(getattr(item, "changes", ()))


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
