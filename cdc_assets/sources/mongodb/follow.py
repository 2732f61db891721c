"""What a change stream's reader yields, decided without the stream: fed each event and each quiet moment (an
empty getMore and the postBatchResumeToken it left), it hands out the engine's log items and says when a bounded
read is over.

    event ──> TransactionAssembler ──> Transaction / TransactionPart
                                       CollectionEnded (drop, rename, dropDatabase, invalidate)
                                           ──> SchemaChange kind OTHER (the engine applies schema_change_policy);
                                               an invalidate also ends the read: the server closed the stream
    quiet ──> a transaction the high-water mark completes; past `stop_at` with none pending: Idle(mark), done;
              quiet for `idle_secs`: Idle(mark), or Idle() while a transaction is open (its mark is no resume point)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cdc_assets.core.boundary import LogItem
from cdc_assets.core.events import Idle, Transaction
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
        pending = self.assembler.pending
        if self.stop_at is not None and mark is not None and not is_before(mark, self.stop_at) and not pending:
            if is_before(self.reported, mark):
                step.items.append(Idle(mark))
                self.reported = mark
            step.done = True
        elif quiet_for >= self.idle_secs:
            step.items.append(Idle(None if pending or mark is None else mark))
        return step

    def _emit(self, outputs: list[Output]) -> Step:
        step = Step()
        for item in outputs:
            if isinstance(item, CollectionEnded):
                step.items.append(item.as_schema_change())
                self.reported = item.position
                if item.ends_stream:
                    step.done = True
                    return step
                continue
            step.items.append(item)
            if isinstance(item, Transaction):
                self.reported = item.end
                if self.stop_at is not None and not is_before(item.end, self.stop_at):
                    step.done = True
                    return step
        return step
