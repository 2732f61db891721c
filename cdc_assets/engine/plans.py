"""Planning splits, and keeping plans frozen: one JSON file per table under <data_dir>/plans/<task_id>/.

Integer keys split evenly when their distribution allows it ((max-min+1)/rows within [0.05, 1000], the
rule Flink CDC and ape-dts use); every other key is cut by next-boundary queries, which read the key
index only.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

from cdc_assets.core.keys import key_kind
from cdc_assets.core.splits import KeyValue, SplitPlan
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.resumer.records import now_text
from cdc_assets.sources.base import Source

EVEN_FACTOR = (0.05, 1000.0)


def plan_table(source: Source, schema: TableSchema, split_size: int) -> SplitPlan:
    kind = key_kind(schema.split_column)
    stats = source.key_stats(schema, kind)
    if stats.min is None:
        boundaries: list[KeyValue] = []
    elif kind == "int" and EVEN_FACTOR[0] <= (stats.max - stats.min + 1) / max(stats.rows, 1) <= EVEN_FACTOR[1]:
        step = max(1, math.ceil(split_size * (stats.max - stats.min + 1) / max(stats.rows, 1)))
        boundaries = list(range(stats.min + step, stats.max + 1, step))
    else:
        boundaries = _probe_boundaries(source, schema, kind, split_size, stats.min)
    return SplitPlan(
        table=schema.table, split_column=schema.split_column.name, key_kind=kind, boundaries=tuple(boundaries),
        estimated_rows=_estimates(stats.rows, len(boundaries) + 1, split_size), created_at=now_text(),
    )


def _probe_boundaries(source: Source, schema: TableSchema, kind: str, split_size: int, first: KeyValue) -> list[KeyValue]:
    """Each boundary is the key `split_size` rows past the previous one; a run of equal split-column
    values longer than a split moves the boundary to the next distinct value, so it is never cut."""
    boundaries: list[KeyValue] = []
    start: KeyValue | None = None
    while True:
        boundary = source.key_at_offset(schema, kind, start, split_size)
        if boundary is not None and boundary == (first if start is None else start):
            boundary = source.next_key_after(schema, kind, boundary)
        if boundary is None:
            return boundaries
        boundaries.append(boundary)
        start = boundary


def _estimates(rows: int, count: int, split_size: int) -> tuple[int, ...]:
    if count == 1:
        return (rows,)
    each = min(split_size, math.ceil(rows / count))
    return tuple([each] * (count - 1) + [max(rows - each * (count - 1), 0)])


class PlanStore:
    def __init__(self, data_dir: Path, task_id: str) -> None:
        self.dir = data_dir / "plans" / task_id

    def path(self, table: TableId) -> Path:
        return self.dir / f"{table}.json"

    def load(self, table: TableId) -> SplitPlan | None:
        path = self.path(table)
        return SplitPlan.from_json(json.loads(path.read_text())) if path.exists() else None

    def save(self, plan: SplitPlan) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path(plan.table).with_suffix(".tmp")
        tmp.write_text(json.dumps(plan.to_json(), indent=1))
        os.replace(tmp, self.path(plan.table))  # atomic: a crash never leaves half a plan

    def all(self) -> list[SplitPlan]:
        """Every stored plan, configured tables or not (a table just removed from the config still has one)."""
        return [SplitPlan.from_json(json.loads(p.read_text())) for p in sorted(self.dir.glob("*.json"))]

    def delete(self, table: TableId) -> None:
        self.path(table).unlink(missing_ok=True)
