"""Keeping plans frozen: one JSON file per table under <data_dir>/plans/<task_id>/. The source plans
(`SnapshotSource.plan`); a stored plan is never planned again until a replan.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from cdc_assets.core.splits import SplitPlan
from cdc_assets.core.tables import TableId


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
