"""Registering split plans as dynamic partitions: from the CLI (`plan`) and from the planner sensor."""
from __future__ import annotations

import dagster as dg

from cdc_assets.core.splits import SplitPlan
from cdc_assets.defs.names import partitions_name


def missing_keys(instance: dg.DagsterInstance, task_id: str, plan: SplitPlan) -> list[str]:
    name = partitions_name(task_id, plan.table)
    have = set(instance.get_dynamic_partitions(name))
    return [s.id for s in plan.splits if s.id not in have]


def stale_keys(instance: dg.DagsterInstance, task_id: str, plan: SplitPlan) -> list[str]:
    """Partitions of an older plan of the table (after `plan --replan`)."""
    wanted = {s.id for s in plan.splits}
    return [k for k in instance.get_dynamic_partitions(partitions_name(task_id, plan.table)) if k not in wanted]


def add_requests(instance: dg.DagsterInstance, task_id: str, plans: list[SplitPlan]) -> list[dg.AddDynamicPartitionsRequest]:
    return [
        dg.AddDynamicPartitionsRequest(partitions_name(task_id, p.table), keys)
        for p in plans if (keys := missing_keys(instance, task_id, p))
    ]


def register(instance: dg.DagsterInstance, task_id: str, plans: list[SplitPlan]) -> int:
    """Make the instance's partitions equal the plans' splits; returns how many keys were added."""
    added = 0
    for plan in plans:
        name = partitions_name(task_id, plan.table)
        for key in stale_keys(instance, task_id, plan):
            instance.delete_dynamic_partition(name, key)
        keys = missing_keys(instance, task_id, plan)
        if keys:
            instance.add_dynamic_partitions(name, keys)
            added += len(keys)
    return added
