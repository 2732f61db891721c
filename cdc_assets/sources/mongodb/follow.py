"""What a change stream's reader yields, decided without the stream: fed each event and each quiet moment (an
empty getMore and the postBatchResumeToken it left), it hands out the engine's log items and says when a bounded
read is over.

    event ──> TransactionAssembler ──> Transaction / TransactionPart
                                       CollectionEnded (drop, rename, dropDatabase, invalidate)
                                           ──> SchemaChange kind OTHER (the engine applies schema_change_policy);
                                               an invalidate also ends the read: the server closed the stream
    quiet ──> a transaction the high-water mark completes; quiet for `idle_secs`: Idle(mark), or Idle() while a
              transaction is open (a mark inside it is no resume point)

A bounded read yields nothing positioned after `stop_at`: it ends, reporting `stop_at` (or the high-water mark at
or past it) as Idle, once the stream shows something after it -- a high-water mark with no transaction open, a
transaction whose first event lies after it, or an item positioned after it. The assembler learns that a
transaction ended only from what follows it, so a transaction is never held back waiting for that.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cdc_assets.core.boundary import LogItem
from cdc_assets.core.events import Idle, Transaction, TransactionPart
from cdc_assets.core.positions import MongoPosition, is_before
from cdc_assets.core.tables import TableId
from cdc_assets.sources.mongodb.changes import UPDATE_LOOKUP, CollectionEnded
from cdc_assets.sources.mongodb.collections import CollectionSpec
from cdc_assets.sources.mongodb.transactions import Output, TransactionAssembler


@dataclass
class Step:
    items: list[LogItem] = field(default_factory=list)
    done: bool = False  # the read is over (stop_at reached, or the stream was invalidated)


class Follower:
    def __init__(self, specs: dict[TableId, CollectionSpec], start: MongoPosition, stop_at: MongoPosition | None,
                 part_events: int | None = None, idle_secs: float = 1.0, full_document: str = UPDATE_LOOKUP) -> None:
        self.assembler = TransactionAssembler(specs, full_document, part_events)
        self.reported = start  # the last resume point handed out
        self.stop_at = stop_at
        self.idle_secs = idle_secs

    def event(self, event: dict) -> Step:
        return self._emit(self.assembler.add(event))

    def quiet(self, mark: MongoPosition | None, quiet_for: float) -> Step:
        step = self._emit(self.assembler.idle(mark) if mark is not None else [])
        if step.done:
            return step
        if self.stop_at is not None and mark is not None and not is_before(mark, self.stop_at) \
                and self.assembler.pending is None:
            return self._stop(step, mark)
        if quiet_for >= self.idle_secs:
            step.items.append(Idle(None if self.assembler.pending is not None or mark is None else mark))
        return step

    def _emit(self, outputs: list[Output]) -> Step:
        step = Step()
        for output in outputs:
            item = output.as_schema_change() if isinstance(output, CollectionEnded) else output
            if self._after_stop(_position(item)):
                return self._stop(step, self.stop_at)
            step.items.append(item)
            if not isinstance(item, TransactionPart):
                self.reported = _position(item)
            if isinstance(output, CollectionEnded) and output.ends_stream:
                step.done = True
                return step
            if isinstance(item, Transaction) and self.stop_at is not None and not is_before(item.end, self.stop_at):
                step.done = True
                return step
        if self._after_stop(self.assembler.pending):
            return self._stop(step, self.stop_at)
        return step

    def _after_stop(self, position: MongoPosition | None) -> bool:
        return self.stop_at is not None and position is not None and is_before(self.stop_at, position)

    def _stop(self, step: Step, boundary: MongoPosition) -> Step:
        if is_before(self.reported, boundary):
            step.items.append(Idle(boundary))
            self.reported = boundary
        step.done = True
        return step


def _position(item: LogItem) -> MongoPosition:
    return item.end if isinstance(item, Transaction) else item.floor if isinstance(item, TransactionPart) \
        else item.position
