"""Names shared by the Dagster objects of a task: asset keys, partition sets, jobs, sensors, the run tag."""
from __future__ import annotations

import dagster as dg

from cdc_assets.core.tables import TableId

# The tag naming the task of a run that writes its target (sync, reset, savepoint jobs): dagster.yaml's run queue
# holds one run per value, and a code location of many tasks finds the run's task by it (defs/resources.run_task).
TASK_TAG = "cdc_assets/incremental_task"


def asset_key(task_id: str, table: TableId) -> dg.AssetKey:
    return dg.AssetKey([task_id, *table.asset_path])


def partitions_name(task_id: str, table: TableId) -> str:
    return f"{task_id}__{'__'.join(table.asset_path)}__splits"


def partitions_def(task_id: str, table: TableId) -> dg.DynamicPartitionsDefinition:
    return dg.DynamicPartitionsDefinition(name=partitions_name(task_id, table))
