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
        description=f"Snapshot of {config.source.db_type} table {table} into "
                    + ", ".join(f"the {t.db_type} target {t.name}" for t in config.targets)
                    + ", one partition per primary-key split.",
        kinds={"spark", config.source.db_type},
        metadata={"source_table": str(table), "target": str(config.target.db_url),
                  **({f"target_{t.name}": f"{t.db_url} ({'required' if t.required else 'optional'})"
                      for t in config.targets} if len(config.targets) > 1 else {}),
                  **({"commit_policy": config.pipeline.commit_policy} if len(config.targets) > 1 else {})},
    )
    def _snapshot(context: dg.AssetExecutionContext, cdc_task: CdcTask, pyspark: TaskSpark) -> dg.MaterializeResult:
        try:
            cdc_task.runtime.adopt_spark(pyspark.spark_session, started=pyspark.started)
            results = snapshot_splits(cdc_task.runtime, table, list(context.partition_keys))
        except CdcError as exc:
            raise dg.Failure(description=str(exc)) from None
        for r in results:
            context.log.info(f"{r.split_id}: {'already finished, not re-read' if r.skipped else f'{r.rows} rows'}"
                             + (f"; repaired, {r.kept} rows the log changed meanwhile left as the sync made them"
                                if r.kept is not None else ""))
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
        **_repaired(results),
        **_per_target(results),
    }


def _repaired(results: list[SplitResult]) -> dict:
    """Splits read again because their verification failed (engine/repair.py), and the rows each left to the
    sync because the log changed them while it read."""
    repaired = [r for r in results if r.kept is not None]
    if not repaired:
        return {}
    return {"splits_repaired": dg.MetadataValue.text(", ".join(r.split_id for r in repaired)),
            "repair_rows_left_to_the_log": dg.MetadataValue.int(sum(r.kept for r in repaired))}


def _per_target(results: list[SplitResult]) -> dict:
    """With several targets: what each one did with these splits (rows committed, finished before, failed)."""
    out: dict[str, list[str]] = {}
    for r in results:
        for name, state in r.targets.items():
            out.setdefault(name, []).append(state)
    metadata = {}
    for name, states in out.items():
        rows = sum(int(s.split()[1]) for s in states if s.startswith("rows "))
        failed = [s for s in states if s.startswith("failed")]
        before = sum(1 for s in states if s == "finished before")
        metadata[f"target_{name}_rows"] = dg.MetadataValue.int(rows)
        metadata[f"target_{name}"] = dg.MetadataValue.text(
            f"{len(states) - len(failed) - before} splits committed, {before} finished before, {len(failed)} failed"
            + (f"; {failed[0]}" if failed else ""))
    return metadata
