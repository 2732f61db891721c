"""A batch whose target transaction outlasted `pipeline.checkpoint_timeout_secs`, and what to tune about it.

The checkpoint of a batch commits only after the target applied it, so the target's time is the checkpoint's
time: a slow target delays every checkpoint and makes the log pile up behind it. As SeaTunnel's advice for
checkpoint timeouts says: make each checkpoint smaller (fewer changes per batch), or make the sink faster (here:
the target table's indexes, triggers and foreign keys, which every upsert and delete by key goes through).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SlowBatch:
    position: str  # the batch's checkpoint
    events: int  # row changes read
    rows: int  # rows written after compaction by key
    transactions: int
    target_secs: float  # apply + checkpoint write + commit in the target
    timeout_secs: float
    after_events: int  # pipeline.checkpoint_after_events in force

    @property
    def rows_per_sec(self) -> float:
        return self.rows / self.target_secs if self.target_secs > 0 else 0.0

    def advice(self) -> str:
        smaller = max(1, self.after_events // 4)
        return (f"the batch checkpointed at {self.position} took {self.target_secs:.1f} s in the target, over "
                f"pipeline.checkpoint_timeout_secs {self.timeout_secs:g}: {self.events} changes in "
                f"{self.transactions} transactions, {self.rows} rows written ({self.rows_per_sec:.0f} rows/s). "
                f"Lower pipeline.checkpoint_after_events (now {self.after_events}, e.g. {smaller}) so each target "
                "transaction is smaller, and check the target table: an index on its key (every upsert and delete "
                "looks rows up by key), triggers, foreign keys and locks held by other sessions")


def slow(position: str, events: int, rows: int, transactions: int, target_secs: float, timeout_secs: float,
         after_events: int) -> SlowBatch | None:
    """The batch's report when `target_secs` exceeds `timeout_secs`, else None."""
    if target_secs <= timeout_secs:
        return None
    return SlowBatch(position, events, rows, transactions, target_secs, timeout_secs, after_events)
