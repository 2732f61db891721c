"""Verification always on: the `<task_id>_verify` sensor (when `verify.every_secs` is set) asks each tick for the
`split_matches_source` check of the splits proven equal longest ago, one run per split, so that each table's Checks
tab shows when every split was last proven equal; with `verify.repair: auto` it also materializes each split whose
last verification failed, and the asset's checks verify it again in that run."""
from __future__ import annotations

import dagster as dg

from cdc_assets.config import TaskConfig, load_config
from cdc_assets.defs.checks import SPLIT_CHECK
from cdc_assets.defs.names import asset_key
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.verify_rotation import next_splits

REPAIR_TAG = "cdc/repair"


def verify_sensor(config: TaskConfig, config_path: str) -> dg.SensorDefinition | None:
    settings = config.verify
    if settings.every_secs <= 0:
        return None
    keys = [asset_key(config.task_id, t) for t in config.source.table_ids]

    @dg.sensor(
        name=f"{config.task_id}_verify",
        description=f"Every {settings.every_secs} s: the split check of the {settings.splits_per_tick} splits proven "
                    f"equal longest ago (lock-free); repair: {settings.repair}.",
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=settings.every_secs,
        target=dg.AssetSelection.assets(*keys),
    )
    def _verify(context: dg.SensorEvaluationContext):
        runtime = TaskRuntime(load_config(config_path))
        try:
            rotation = next_splits(runtime, settings.splits_per_tick)
        finally:
            runtime.close()
        repairing = rotation.repair if settings.repair == "auto" else []
        # One repair per failed verification (the run key): a repair run that failed is not started again until a
        # later verification fails again.
        requests = [dg.RunRequest(run_key=f"repair:{split}:{failed_at}", partition_key=split,
                                  asset_selection=[asset_key(config.task_id, table)], tags={REPAIR_TAG: split})
                    for table, split, failed_at in repairing]
        busy = {split for _, split, _ in repairing}
        requests += [dg.RunRequest(partition_key=split, asset_selection=[],
                                   asset_check_keys=[dg.AssetCheckKey(asset_key(config.task_id, table), SPLIT_CHECK)])
                     for table, split in rotation.verify if split not in busy]
        if not requests:
            return dg.SkipReason("no split to verify yet: the tables wait for their snapshot or the log phase")
        return dg.SensorResult(run_requests=requests)

    return _verify
