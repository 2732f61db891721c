"""Read the log on its own thread while the driver applies: decoding (Python) overlaps the target's work
(waiting on a socket), and the bounded queue keeps memory flat when the target is slower than the log."""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

QUEUE_ITEMS = 64  # transactions (or idles) read ahead
_END = object()


class prefetch:
    def __init__(self, items: Iterator, close_source: Callable[[], None]) -> None:
        self._queue: queue.Queue = queue.Queue(QUEUE_ITEMS)
        self._closing = threading.Event()
        self._close_source = close_source
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
        item = self._queue.get()
        if item is _END:
            raise StopIteration
        if isinstance(item, _Failure):
            raise item.exc
        return item

    def close(self) -> None:
        self._closing.set()
        self._close_source()
        self._thread.join(timeout=30)


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
