"""Wiring: one config -> the Dagster definitions of its task."""
from __future__ import annotations

import dagster as dg

from cdc_assets.config import TaskConfig
from cdc_assets.defs.assets import table_asset
from cdc_assets.defs.headroom_check import headroom_check, headroom_job, headroom_schedule
from cdc_assets.defs.checks import split_check, table_check
from cdc_assets.defs.incremental import incremental_job, incremental_sensor
from cdc_assets.defs.reset_job import reset_job
from cdc_assets.defs.resources import CdcTask, task_spark
from cdc_assets.defs.savepoints import savepoint_jobs
from cdc_assets.defs.sensors import split_planner_sensor
from cdc_assets.defs.verify_sensor import verify_sensor


def build_definitions(config: TaskConfig, config_path: str) -> dg.Definitions:
    assets = [table_asset(config, t) for t in config.source.table_ids]
    job = incremental_job(config)
    check = headroom_check(config)
    checks_job = headroom_job(config, check)
    verifying = verify_sensor(config, config_path)
    return dg.Definitions(
        assets=assets,
        asset_checks=[check, *(c for t in config.source.table_ids for c in (split_check(config, t), table_check(config, t)))],
        jobs=[job, checks_job, reset_job(config), *savepoint_jobs(config)],
        schedules=[headroom_schedule(checks_job)],
        sensors=[split_planner_sensor(config, config_path), incremental_sensor(config, config_path, job),
                 *([verifying] if verifying else [])],
        resources={"cdc_task": CdcTask(config_path=config_path), "pyspark": task_spark(config)},
        # A run's steps (a table's splits, its checks) in the run's process: the default starts a process per step,
        # each importing Dagster, PySpark and this package again (docs/benchmarks/backfill.md).
        executor=dg.in_process_executor,
    )
