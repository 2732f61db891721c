"""Asset checks: each split's rows in the target equal the source's, compared at one log position while the log
phase keeps running (engine/verify.py)."""

import dagster as dg

from cdc_assets.config import TaskConfig
from cdc_assets.core.tables import TableId
from cdc_assets.defs.names import asset_key, partitions_def
from cdc_assets.defs.resources import CdcTask
from cdc_assets.engine.verify import FAILED, INCONCLUSIVE, SplitCheck, summary_lines, verify_table
from cdc_assets.errors import CdcError

SPLIT_CHECK = "split_matches_source"
TABLE_CHECK = "table_matches_source"
PARTITION = "dagster/partition"
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


def split_check(config: TaskConfig, table: TableId) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset_key(config.task_id, table), name=SPLIT_CHECK,
                    partitions_def=partitions_def(config.task_id, table),
                    description="Row count and row digests of this split equal in source and target, at one log "
                                "position; on failure, materialize the partition to repair it.")
    def _check(context: dg.AssetCheckExecutionContext, cdc_task: CdcTask) -> dg.AssetCheckResult:
        # A backfill's run of several splits (partitions_per_run) checks each of them; `partition_key` would raise.
        return _result(_run(cdc_task, table, list(context.partition_keys)))

    return _check


def table_check(config: TaskConfig, table: TableId) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset_key(config.task_id, table), name=TABLE_CHECK,
                    description="Every split of the table equal in source and target (split by split, each at one "
                                "log position); names the splits that differ.")
    def _check(context: dg.AssetCheckExecutionContext, cdc_task: CdcTask) -> dg.AssetCheckResult:
        return _result(_run(cdc_task, table, _run_splits(context, cdc_task, table)))

    return _check


def _run_splits(context: dg.AssetCheckExecutionContext, cdc_task: CdcTask, table: TableId) -> list[str] | None:
    """Dagster runs this check with every materialization of the asset, a partition's too: then it checks the
    splits the run materialized (a repair), not the whole table again. Alone, it checks every split."""
    tags = context.run.tags
    if PARTITION in tags:
        return [tags[PARTITION]]
    if RANGE_START in tags:
        plan = cdc_task.runtime.plans.load(table)
        ids = [s.id for s in plan.splits] if plan else []
        if tags[RANGE_START] in ids and tags.get(RANGE_END) in ids:
            return ids[ids.index(tags[RANGE_START]):ids.index(tags[RANGE_END]) + 1]
    return None


def _run(cdc_task: CdcTask, table: TableId, split_ids: list[str] | None) -> list[SplitCheck]:
    try:
        return [c for lane in cdc_task.runtime.lanes for c in verify_table(lane, table, split_ids)]
    except CdcError as exc:
        raise dg.Failure(description=str(exc)) from None


def _result(checks: list[SplitCheck]) -> dg.AssetCheckResult:
    failed = [c for c in checks if c.status == FAILED]
    unknown = [c for c in checks if c.status == INCONCLUSIVE]
    metadata = {
        "splits": dg.MetadataValue.int(len(checks)),
        "failed_splits": dg.MetadataValue.text(", ".join(c.split_id for c in failed) or "none"),
        "inconclusive_splits": dg.MetadataValue.text(", ".join(c.split_id for c in unknown) or "none"),
        "source_rows": dg.MetadataValue.int(sum(c.source_rows for c in checks)),
        "target_rows": dg.MetadataValue.int(sum(c.target_rows for c in checks)),
        "held_secs_max": dg.MetadataValue.float(round(max((c.held_secs for c in checks), default=0.0), 3)),
        # Keys a later lock-free round judged again: they changed around the first read, or differed in it.
        "rechecked_keys": dg.MetadataValue.int(sum(c.rechecked for c in checks)),
        # Holds the source's writers refused (deadlock, lock wait timeout) and that were taken again.
        "busy_retries": dg.MetadataValue.int(sum(c.retries for c in checks)),
        "per_split": dg.MetadataValue.md("\n".join(f"- {line}" for line in summary_lines(checks))),
    }
    if failed:
        return dg.AssetCheckResult(passed=False, metadata=metadata, description="; ".join(c.line() for c in failed))
    # Inconclusive is not a mismatch: a warning that says what the check waited for.
    return dg.AssetCheckResult(passed=not unknown, metadata=metadata, severity=dg.AssetCheckSeverity.WARN,
                               description="; ".join(summary_lines(unknown)) or None)
