"""One asset per source table, partitioned by its primary-key splits."""

import dagster as dg

from cdc_assets.config import TaskConfig
from cdc_assets.core.tables import TableId
from cdc_assets.defs.names import asset_key, partitions_def
from cdc_assets.defs.resources import CdcTask, TaskSpark
from cdc_assets.engine.snapshot import SplitResult, snapshot_splits
from cdc_assets.errors import CdcError


def table_asset(config: TaskConfig, table: TableId) -> dg.AssetsDefinition:
    @dg.asset(
        key=asset_key(config.task_id, table),
        partitions_def=partitions_def(config.task_id, table),
        group_name=config.task_id,
        backfill_policy=dg.BackfillPolicy.multi_run(config.snapshot.partitions_per_run),
        description=f"Snapshot of {config.source.db_type} table {table} into the {config.target.db_type} target, "
                    f"one partition per primary-key split.",
        kinds={"spark", config.source.db_type},
        metadata={"source_table": str(table), "target": str(config.target.db_url)},
    )
    def _snapshot(context: dg.AssetExecutionContext, cdc_task: CdcTask, pyspark: TaskSpark) -> dg.MaterializeResult:
        try:
            cdc_task.runtime.adopt_spark(pyspark.spark_session, started=pyspark.started)
            results = snapshot_splits(cdc_task.runtime, table, list(context.partition_keys))
        except CdcError as exc:
            raise dg.Failure(description=str(exc)) from None
        for r in results:
            context.log.info(f"{r.split_id}: {'already finished, not re-read' if r.skipped else f'{r.rows} rows'}")
        return dg.MaterializeResult(metadata=_metadata(results))

    return _snapshot


def _metadata(results: list[SplitResult]) -> dict:
    rows = sum(r.rows for r in results)
    seconds = max((r.seconds for r in results), default=0.0)
    read = [r for r in results if not r.skipped]
    return {
        "splits": dg.MetadataValue.text(", ".join(r.split_id for r in results)),
        "rows": dg.MetadataValue.int(rows),
        "bytes": dg.MetadataValue.int(sum(r.bytes for r in results)),
        "low_watermark": dg.MetadataValue.text(read[0].low_watermark if read else results[0].low_watermark),
        "high_watermark": dg.MetadataValue.text(read[0].high_watermark if read else results[0].high_watermark),
        "seconds": dg.MetadataValue.float(round(seconds, 3)),
        "rows_per_sec": dg.MetadataValue.float(round(rows / seconds, 1) if seconds else 0.0),
        "splits_skipped": dg.MetadataValue.int(len(results) - len(read)),
    }
