"""Which splits verification looks at next, when it runs on its own (the `<task_id>_verify` sensor): those proven
equal longest ago, never verified first, among finished splits of tables the log phase applies; and which failed
splits to repair first (`verify.repair: auto`)."""
from __future__ import annotations

from dataclasses import dataclass

from cdc_assets.core.tables import TableId
from cdc_assets.engine.repair import needing_repair
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.verify import last_results


@dataclass(frozen=True)
class Rotation:
    verify: list[tuple[TableId, str]]  # (table, split id), the next to verify
    # Splits whose current finished marker failed its last verification, each with when that verification ran
    # (one repair per failed verification).
    repair: list[tuple[TableId, str, str]]


def next_splits(rt: TaskRuntime, count: int) -> Rotation:
    checkpoint = rt.resumer.checkpoint()
    applied = set((rt.resumer.schemas(checkpoint.schema_version) or {}) if checkpoint else ())
    candidates: list[tuple[TableId, str]] = []
    failing: list[tuple[TableId, str]] = []
    for table in rt.config.source.table_ids:
        plan = rt.plans.load(table)
        if plan is None or table not in applied:
            continue
        ids = [s.id for s in plan.splits]
        finished = {lane.name: lane.resumer.finished(ids, plan_id=plan.plan_id) for lane in rt.lanes}
        failing += [(table, s) for s in sorted(set().union(*(needing_repair(lane, finished[lane.name])
                                                             for lane in rt.lanes)))]
        candidates += [(table, s) for s in ids if s in finished[rt.name]]
    results = last_results(rt, [s for _, s in candidates])

    def last_checked(item: tuple[TableId, str]) -> str:
        record = results.get(item[1])
        return "" if record is None else str(record.position_data.get("checked_at") or "")

    ordered = sorted(candidates, key=last_checked)
    return Rotation(ordered[:count], [(t, s, last_checked((t, s))) for t, s in failing])
