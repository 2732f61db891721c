"""A transaction that arrives in parts (TransactionPart), and what applied changes amount to (Tally).

A transaction larger than `pipeline.transaction_part_events` is handed out part by part, then its end
(a Transaction with the rest). Each part is applied as it comes, in log order, inside one target transaction that
the end commits with the checkpoint, so memory holds one part; unless the skip filter still needs the end to
decide (core/skip_filter.py, `SkipFilter.may_skip`): then the parts are held whole until it.

    first part --> applying (each part's changes applied now) --> end: the rest, committed with the checkpoint
               \\-> holding (each part's changes kept)        --> end: the whole transaction, one batch
    stream ends before the end --> nothing of it counts (its target transaction is rolled back)

Pure: no I/O; the lane applies what `take` hands back.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from cdc_assets.core.batches import MovesAcrossParts, TableChanges
from cdc_assets.core.events import RowChange, Transaction, TransactionPart
from cdc_assets.core.tables import TableId


@dataclass
class Tally:
    """What a batch (or a transaction in parts) amounts to, added to the report once it committed."""

    transactions: int = 0
    commit_time: float | None = None  # the source's commit time of its last transaction
    events: int = 0  # row changes applied
    rows: int = 0  # rows written after compaction by key
    per_table: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0  # the target's time on it: parts applied, then the commit

    def add(self, events: int, net: Mapping[TableId, TableChanges]) -> None:
        """`events` row changes applied, compacted to `net`."""
        self.events += events
        self.rows += sum(tc.size for tc in net.values())
        for table, table_changes in net.items():
            self.per_table[str(table)] = self.per_table.get(str(table), 0) + table_changes.events


class TransactionInParts:
    """The transaction arriving in parts: applied part by part, or `holding` its changes whole while the skip
    filter still needs its end."""

    def __init__(self, holding: bool) -> None:
        self.held: list[RowChange] | None = [] if holding else None
        self.tally = Tally(transactions=1)
        self.moves = MovesAcrossParts()  # shared by the parts' batches (core/batches.py)

    @property
    def holding(self) -> bool:
        return self.held is not None

    def take(self, part: TransactionPart) -> list[RowChange] | None:
        """The part's changes to apply now, or None when they are held."""
        if self.held is None:
            return part.changes
        self.held.extend(part.changes)
        return None

    def end(self, tx: Transaction) -> Transaction:
        """The transaction's end with what is left to apply of it: all of it when held, else its own changes."""
        self.tally.commit_time = tx.commit_time
        if self.held is None:
            return tx
        return Transaction(self.held + tx.changes, tx.end, tx.commit_time, tx.xid)
