"""Change-stream events grouped into the engine's transactions.

Events of one multi-document transaction carry the same `lsid` + `txnNumber` ("Change Events": "to identify events
for a single transaction, you can use the combination of lsid and txnNumber") and come one after another; other
events are transactions of their own. The stream does not mark a transaction's last event, so a transaction is
complete when an event of another identity arrives, or when the stream idles with a high-water-mark token
(postBatchResumeToken) that sorts after its last event: a batch cut short inside the transaction leaves the
postBatchResumeToken equal to that last event's token, which does not complete it. A high-water mark at the
transaction's own cluster time sorts before its events and does not complete it either: on an idle deployment the
transaction waits for the next write or the primary's periodic no-op (every 10 s), never for a guess.

    idle ──event──> pending(txn) ──same txn──> pending
      ^                 │ other event / high water past it
      └──── emit Transaction(end = last event's token) ────┘

A transaction longer than `part_events` is handed out in `TransactionPart`s, so none is held whole.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cdc_assets.core.events import RowChange, Transaction, TransactionPart
from cdc_assets.core.positions import MongoPosition, is_before
from cdc_assets.core.tables import TableId
from cdc_assets.sources.mongodb.changes import UPDATE_LOOKUP, CollectionEnded, commit_time, position_of, to_change
from cdc_assets.sources.mongodb.collections import CollectionSpec
from cdc_assets.sources.mongodb.values import ejson

Output = Transaction | TransactionPart | CollectionEnded


@dataclass
class _Pending:
    identity: tuple[str, int]
    first: MongoPosition  # its first event's token: where a bounded read ending before it stops
    changes: list[RowChange] = field(default_factory=list)
    last: MongoPosition | None = None
    time: float | None = None


class TransactionAssembler:
    """Feed events in stream order; get transactions (and stream-ending events) back in the same order."""

    def __init__(self, specs: dict[TableId, CollectionSpec], full_document: str = UPDATE_LOOKUP,
                 part_events: int | None = None) -> None:
        self.specs = specs
        self.full_document = full_document
        self.part_events = part_events
        self._pending: _Pending | None = None

    def add(self, event: dict) -> list[Output]:
        change = to_change(event, self.specs, self.full_document)
        position = position_of(event)
        identity = _identity(event)
        out: list[Output] = []
        if self._pending is not None and self._pending.identity != identity:
            out.append(self._finish())
        if isinstance(change, CollectionEnded):
            return [*out, change]
        if identity is None:
            # An event that changed nothing captured still moves the position: an empty transaction carries it.
            return [*out, Transaction([change] if change else [], position, commit_time(event))]
        if self._pending is None:
            self._pending = _Pending(identity, position)
        pending = self._pending
        if change is not None:
            if self.part_events and len(pending.changes) >= self.part_events:
                # Floor = the previous event: the transaction ends at this event or later, strictly after it.
                out.append(TransactionPart(pending.changes, pending.last))
                pending.changes = []
            pending.changes.append(change)
        pending.last, pending.time = position, commit_time(event)
        return out

    @property
    def pending(self) -> MongoPosition | None:
        """The first event's token of the transaction being read (no position past it is a resume point)."""
        return self._pending.first if self._pending is not None else None

    def idle(self, high_water: MongoPosition) -> list[Output]:
        """The stream has nothing more for now and reports `high_water` (its postBatchResumeToken)."""
        if self._pending is not None and is_before(self._pending.last, high_water):
            return [self._finish()]
        return []

    def _finish(self) -> Transaction:
        pending, self._pending = self._pending, None
        return Transaction(pending.changes, pending.last, pending.time, xid=pending.identity[1],
                           extra={"lsid": pending.identity[0]})


def _identity(event: dict) -> tuple[str, int] | None:
    if "lsid" not in event or "txnNumber" not in event:
        return None
    return ejson(event["lsid"]), int(event["txnNumber"])
