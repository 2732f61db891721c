"""Splits: half-open key ranges of one table, and the frozen plan that lists them.

A split covers `start <= k < end` on the table's split column (the first key column);
`None` means unbounded. The last split is open-ended so rows inserted after planning are read.
Rows sharing a split-column value always fall in one split, which keeps composite keys correct.

Split lifecycle, as the resumer records it (`SplitPhase`; a planned split has no record yet, a finished one has
its finished marker, a record of its own):

    planned -> LOW_RECORDED -> HIGH_RECORDED -> finished marker
                    |              |
                    +--> FAILED <--+      (read again from a new LOW_RECORDED)
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import Enum
from typing import Union

from cdc_assets.core.tables import TableId

KeyValue = Union[int, str]  # ints stay ints; every other key kind travels as its canonical text


class SplitPhase(str, Enum):
    """The `phase` of a split's SnapshotDoing record; its value is what position.log shows."""

    LOW_RECORDED = "LOW_RECORDED"  # the low watermark is taken, the read may have begun
    HIGH_RECORDED = "HIGH_RECORDED"  # the rows are staged and the high watermark taken; the commit comes next
    FAILED = "FAILED"  # the read or its commit failed; the record says why


@dataclass(frozen=True)
class KeyRange:
    start: KeyValue | None
    end: KeyValue | None

    def __post_init__(self) -> None:
        if self.start is not None and self.start == self.end:
            raise ValueError(f"empty key range [{self.start}, {self.end})")

    def __str__(self) -> str:
        lo = "-inf" if self.start is None else repr(self.start)
        hi = "+inf" if self.end is None else repr(self.end)
        return f"[{lo}, {hi})"


def split_id(table: TableId, index: int, width: int = 4) -> str:
    """`shop.orders:0007`: zero-padded so partitions sort in the Dagster UI."""
    return f"{table}:{index:0{width}d}"


def parse_split_id(text: str) -> tuple[TableId, int]:
    table, _, index = text.rpartition(":")
    return TableId.parse(table), int(index)


@dataclass(frozen=True)
class Split:
    table: TableId
    index: int
    range: KeyRange
    estimated_rows: int
    width: int = 4

    @property
    def id(self) -> str:
        return split_id(self.table, self.index, self.width)


@dataclass(frozen=True)
class SplitPlan:
    """The frozen split plan of one table. `plan_id` is a hash of everything that shapes the splits."""

    table: TableId
    split_column: str
    key_kind: str  # "int" or a text-carried kind: "decimal", "string", "date", "datetime", "uuid", "binary"
    boundaries: tuple[KeyValue, ...]  # n-1 inner boundaries for n splits
    estimated_rows: tuple[int, ...]
    created_at: str
    # The source's log position when the table was planned, after it joined the publication (PostgreSQL): every
    # low watermark of the plan comes later. A table planned while the log phase already runs holds the slot's
    # acknowledgement here until it joins. Part of the id: a table planned again is snapshotted again.
    planned_at: dict | None = None
    # The snapshot.split_size it was planned with (None: planned before plans kept it). Not part of the id: a
    # changed setting leaves the frozen plan as it is, and says so.
    split_size: int | None = None

    def __post_init__(self) -> None:
        if len(self.estimated_rows) != len(self.boundaries) + 1:
            raise ValueError("a plan needs one row estimate per split")

    @property
    def plan_id(self) -> str:
        shape = [str(self.table), self.split_column, self.key_kind, list(self.boundaries)]
        body = json.dumps(shape if self.planned_at is None else [*shape, self.planned_at], sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:12]

    @property
    def width(self) -> int:
        return max(4, len(str(len(self.estimated_rows) - 1)))

    @property
    def splits(self) -> list[Split]:
        edges: list[KeyValue | None] = [None, *self.boundaries, None]
        return [
            Split(self.table, i, KeyRange(edges[i], edges[i + 1]), self.estimated_rows[i], self.width)
            for i in range(len(self.estimated_rows))
        ]

    def split(self, split_key: str) -> Split:
        for s in self.splits:
            if s.id == split_key:
                return s
        raise KeyError(f"split {split_key} is not in plan {self.plan_id} of {self.table}")

    def to_json(self) -> dict:
        return {
            "type": "SplitPlan",
            "plan_id": self.plan_id,
            "table": str(self.table),
            "split_column": self.split_column,
            "key_kind": self.key_kind,
            "boundaries": list(self.boundaries),
            "estimated_rows": list(self.estimated_rows),
            "created_at": self.created_at,
            **({"planned_at": self.planned_at} if self.planned_at is not None else {}),
            **({"split_size": self.split_size} if self.split_size is not None else {}),
        }

    @classmethod
    def from_json(cls, data: dict) -> "SplitPlan":
        plan = cls(
            table=TableId.parse(data["table"]),
            split_column=data["split_column"],
            key_kind=data["key_kind"],
            boundaries=tuple(data["boundaries"]),
            estimated_rows=tuple(data["estimated_rows"]),
            created_at=data["created_at"],
            planned_at=data.get("planned_at"),
            split_size=data.get("split_size"),
        )
        if data.get("plan_id") not in (None, plan.plan_id):
            raise ValueError(f"plan of {plan.table} was edited: stored id {data['plan_id']} != {plan.plan_id}")
        return plan
