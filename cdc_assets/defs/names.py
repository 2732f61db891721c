"""Names shared by the Dagster objects of a task: asset keys, partition sets, jobs, sensors."""
from __future__ import annotations

import dagster as dg

from cdc_assets.core.tables import TableId


def asset_key(task_id: str, table: TableId) -> dg.AssetKey:
    return dg.AssetKey([task_id, *table.asset_path])


def partitions_name(task_id: str, table: TableId) -> str:
    return f"{task_id}__{'__'.join(table.asset_path)}__splits"


def partitions_def(task_id: str, table: TableId) -> dg.DynamicPartitionsDefinition:
    return dg.DynamicPartitionsDefinition(name=partitions_name(task_id, table))
