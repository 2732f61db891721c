"""The headroom asset check: how close the task is to losing its log position, on every table of the task (one log
serves them all), and the job and schedule that evaluate it."""
from __future__ import annotations

import dagster as dg

from cdc_assets.config import TaskConfig
from cdc_assets.core.headroom import Headroom, Level
from cdc_assets.defs.names import asset_key
from cdc_assets.defs.resources import CdcTask
from cdc_assets.engine.headroom import task_headroom

CHECK_NAME = "log_headroom"


def headroom_check(config: TaskConfig) -> dg.AssetChecksDefinition:
    specs = [dg.AssetCheckSpec(CHECK_NAME, asset=asset_key(config.task_id, t),
                               description="How close the task is to losing its log position: retained binlog "
                                           "files, slot WAL or the oplog window against the server's limit.")
             for t in config.source.table_ids]

    # Subsettable: a run that materializes some tables (a backfill's run of one table's splits) carries their checks
    # only; Dagster refuses to plan such a run over a check set it cannot split.
    @dg.multi_asset_check(specs=specs, name=f"{config.task_id}_log_headroom", can_subset=True)
    def _check(context, cdc_task: CdcTask):
        headroom = task_headroom(cdc_task.runtime)
        selected = context.selected_asset_check_keys
        for spec in specs:
            if spec.key in selected:
                yield result(spec.asset_key, headroom)

    return _check


def result(key: dg.AssetKey, headroom: Headroom) -> dg.AssetCheckResult:
    """Passes when OK; fails as a warning before the position is lost, as an error (with the way out) after."""
    metadata = {"headroom": dg.MetadataValue.text(str(headroom)),
                **{name: value for name, value in headroom.figures.items()}}
    lost = headroom.level is Level.LOST
    return dg.AssetCheckResult(asset_key=key, check_name=CHECK_NAME, passed=headroom.level is Level.OK,
                               severity=dg.AssetCheckSeverity.ERROR if lost else dg.AssetCheckSeverity.WARN,
                               metadata=metadata, description=str(headroom))


def headroom_job(config: TaskConfig, check: dg.AssetChecksDefinition) -> dg.UnresolvedAssetJobDefinition:
    return dg.define_asset_job(f"{config.task_id}_headroom", selection=dg.AssetSelection.checks(check),
                               description="Evaluates the log headroom check of every table of the task.")


def headroom_schedule(job: dg.UnresolvedAssetJobDefinition) -> dg.ScheduleDefinition:
    # Hourly: binlog retention is days and slot limits are GBs; an hour leaves time to act on a warning.
    return dg.ScheduleDefinition(job=job, cron_schedule="7 * * * *", default_status=dg.DefaultScheduleStatus.RUNNING)
