"""The Python interpreter's settings while the log is applied (their effect is measured on
docs/benchmarks/incremental.md).

- Cyclic garbage collector: a catch-up allocates some fifteen objects per change (images, keys, events, COPY
  texts), nearly all freed by reference counting alone, while the read-ahead queue keeps tens of thousands of
  them alive: at the default threshold (700 allocations) the collector runs every few changes and keeps scanning
  what the queue holds, for nothing. Cycles are still collected, every `YOUNG_OBJECTS` allocations.
- GIL switch interval: the reader thread decodes while the applying thread waits for the target; each time the
  target answers, the applying thread waits for the reader to give the GIL up, up to the switch interval (5 ms
  by default), and a batch takes several round trips. At `SWITCH_SECONDS` the target waits for Python far less."""
from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_OBJECTS = 100_000  # allocations (net of deallocations) between two collections of the youngest generation
SWITCH_SECONDS = 0.0002

_lock = threading.Lock()
_inside = 0  # syncs of this process applying the log now: the first one sets, the last one restores
_saved: tuple = ()


@contextmanager
def applying_the_log() -> Iterator[None]:
    global _inside, _saved
    with _lock:
        if _inside == 0:
            threshold, switch = _saved = gc.get_threshold(), sys.getswitchinterval()
            gc.set_threshold(max(threshold[0], YOUNG_OBJECTS), *threshold[1:])
            sys.setswitchinterval(min(switch, SWITCH_SECONDS))
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                gc.set_threshold(*_saved[0])
                sys.setswitchinterval(_saved[1])
