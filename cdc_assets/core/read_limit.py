"""Read limits (SeaTunnel's `read_limit.rows_per_second` / `bytes_per_second`): token buckets that pace rows and
bytes so that a snapshot does not load the production source and a slow sink does not time out checkpoints.

A bucket fills at `rate` tokens a second, keeps at most `burst` saved up, and starts empty. Rows are counted
*after* they arrived: `take(n)` spends n tokens at once (going into debt when it must) and says how long to wait
until the debt is paid. A caller that waits that long after each take has, at every moment it resumes, taken at
most `rate * (now - start)` tokens: the average since the bucket started never exceeds the rate, whatever the
sizes of the takes; a burst is at most one take (or `burst` tokens saved up while nobody took).

Pure logic with an injected clock and sleep; the Spark side is spark/pacing.py, the log phase calls `ChangePacer`.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

BURST_SECS = 1.0  # what a bucket saves up while idle: one second of its rate
OTHER_VALUE_BYTES = 8  # a value that is not text or binary (number, date, bool, None) counts as this many bytes
BATCH_SECS = 0.1  # a paced batch holds about this much of a task's share: the pace is smooth, not 10k-row bursts
ASSUMED_ROW_BYTES = 128  # to size batches under a bytes limit alone (the limit itself counts the real bytes)
MIN_BATCH_ROWS, MAX_BATCH_ROWS = 64, 10_000


class TokenBucket:
    """`rate` tokens a second, at most `burst` saved up; starts empty at the clock's current time."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError(f"a token bucket needs a positive rate, not {rate}")
        self.rate, self.burst, self._clock = float(rate), max(0.0, float(burst)), clock
        self._tokens = 0.0
        self._at = clock()

    def take(self, n: float) -> float:
        """Spend `n` tokens now; the seconds to wait before the next take (0 when the bucket is not in debt)."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate) - n
        self._at = now
        return -self._tokens / self.rate if self._tokens < 0 else 0.0


class Pacer:
    """Rows against one bucket and bytes against another (None: that one is not limited); `pace` waits for the
    later of the two. With neither limit set, `active` is False and `pace` returns at once."""

    def __init__(self, rows_per_second: float | None, bytes_per_second: float | None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], Any] = time.sleep) -> None:
        self._buckets = [(i, TokenBucket(rate, rate * BURST_SECS, clock))
                         for i, rate in enumerate((rows_per_second, bytes_per_second)) if rate is not None]
        self._sleep = sleep

    @property
    def active(self) -> bool:
        return bool(self._buckets)

    def pace(self, rows: int, nbytes: int) -> float:
        """Count `rows` rows of `nbytes` bytes that just passed, and wait as long as the limits say; the wait."""
        amounts = (rows, nbytes)
        wait = max((bucket.take(amounts[i]) for i, bucket in self._buckets), default=0.0)
        if wait > 0:
            self._sleep(wait)
        return wait


@dataclass(frozen=True)
class TaskShare:
    """One Spark task's part of a snapshot's limit (picklable: shipped into every task); None: not limited."""

    rows: float | None
    bytes: float | None

    def pacer(self) -> Pacer:
        return Pacer(self.rows, self.bytes)

    @property
    def batch_rows(self) -> int:
        """Rows per Arrow batch (or per paced chunk) that make about BATCH_SECS of this share."""
        per_sec = self.rows if self.rows is not None else self.bytes / ASSUMED_ROW_BYTES
        return int(min(MAX_BATCH_ROWS, max(MIN_BATCH_ROWS, per_sec * BATCH_SECS)))


def share(rate: float | None, tasks: int) -> float | None:
    """One task's part of an aggregate `rate` when `tasks` tasks run at once (None: no limit)."""
    return None if rate is None else rate / max(1, tasks)


def value_bytes(values: Iterable) -> int:
    """A cheap estimate of the size of a row's values: the length of each str (in characters) and bytes value,
    OTHER_VALUE_BYTES for any other value (numbers, dates, booleans, None)."""
    total = 0
    for v in values:
        total += len(v) if isinstance(v, (str, bytes, bytearray, memoryview)) else OTHER_VALUE_BYTES
    return total


def change_bytes(change) -> int:
    """The estimated size of a row change: its new image's values (`value_bytes`), or for a delete the values of
    its old image, or of its key when the log carries no old image."""
    image = change.after if change.after is not None else change.before
    return value_bytes(image.values() if image is not None else change.key)


class ChangePacer:
    """The log phase's limit (`pipeline.read_limit`): `count` the changes a batch applies, then `pace` once the
    batch is checkpointed: it waits until the events and the estimated bytes (`change_bytes`) since the pacer
    was made are under the limit. `wait(seconds)` should return early on a stop request (threading.Event.wait).
    Without a limit both calls do nothing, not even measure the changes."""

    def __init__(self, rows_per_second: int | None, bytes_per_second: int | None,
                 wait: Callable[[float], Any], clock: Callable[[], float] = time.monotonic) -> None:
        self._pacer = Pacer(rows_per_second, bytes_per_second, clock, wait)
        self._measure = bytes_per_second is not None
        self._events = self._bytes = 0

    def count(self, changes: list) -> None:
        if not self._pacer.active:
            return
        self._events += len(changes)
        if self._measure:
            self._bytes += sum(change_bytes(c) for c in changes)

    def pace(self) -> float:
        """Wait for what was counted since the last call; the seconds asked for (the wait may end earlier)."""
        if not self._pacer.active or not (self._events or self._bytes):
            return 0.0
        events, nbytes, self._events, self._bytes = self._events, self._bytes, 0, 0
        return self._pacer.pace(events, nbytes)


def paced_rows(rows: Iterator[tuple], limit: TaskShare | None) -> Iterator[tuple]:
    """A task's row tuples, paced every `limit.batch_rows` rows (rows, `value_bytes`); as they are without one."""
    if limit is None:
        yield from rows
        return
    pacer, chunk, count, nbytes = limit.pacer(), limit.batch_rows, 0, 0
    measure = limit.bytes is not None
    for row in rows:
        yield row
        count += 1
        if measure:
            nbytes += value_bytes(row)
        if count >= chunk:
            pacer.pace(count, nbytes)
            count = nbytes = 0
    if count:
        pacer.pace(count, nbytes)
