"""The reset job of a task: `cdc-assets reset` from the UI, its target as run config, what it did as metadata.

It carries the incremental job's run-queue tag, so the queue (dagster.yaml: one run per task) never runs it
beside an incremental run, which would write its own checkpoint over the reset."""

from typing import Literal, Optional

import dagster as dg

from cdc_assets.config import TaskConfig
from cdc_assets.defs.names import TASK_TAG
from cdc_assets.defs.resources import CdcTask
from cdc_assets.core.positions import POSITION_FORMS, parse_position
from cdc_assets.engine.reset import reset_targets
from cdc_assets.errors import CdcError


def reset_job_name(task_id: str) -> str:
    return f"{task_id}_reset"


class ResetConfig(dg.Config):
    to: Literal["latest", "earliest", "position"]
    position: Optional[str] = None  # with to: position
    targets: list[str] = []  # the targets whose checkpoints move; empty: every target


def reset_job(config: TaskConfig) -> dg.JobDefinition:
    task_id = config.task_id

    @dg.op(name=f"{task_id}_reset_checkpoint",
           description="Move the checkpoint to the log end (latest: skips what lies between), the oldest position "
                       f"the source keeps (earliest: replays) or a given position ({POSITION_FORMS}).")
    def reset_checkpoint_op(context: dg.OpExecutionContext, config: ResetConfig, cdc_task: CdcTask):
        runtime = cdc_task.runtime
        try:
            if (config.to == "position") != bool(config.position):
                raise CdcError(f"to: {config.to} {'needs' if config.to == 'position' else 'takes no'} position",
                               f"run config: {{to: position, position: ...}}, the position as {POSITION_FORMS}")
            position = parse_position(config.position, runtime.config.source.db_type) if config.position else None
            user = context.run.tags.get("dagster/user", "")
            by = f"dagster run {context.run_id}" + (f" ({user})" if user else "")
            results = reset_targets(runtime, config.to, by, position, config.targets or None)
        except CdcError as exc:
            raise dg.Failure(description=str(exc), allow_retries=False) from None
        for result in results:
            context.log.warning(result.warning)
            for line in result.lines()[:2]:
                context.log.info(line)
        result = results[0]
        return dg.Output(None, metadata={
            "checkpoints": dg.MetadataValue.md("\n".join(f"- {r.task_id}: {r.before} -> {r.after} ({r.effect})"
                                                          for r in results)),
            "from": dg.MetadataValue.text(str(result.before)), "to": dg.MetadataValue.text(str(result.after)),
            "reset_to": dg.MetadataValue.text(result.to), "effect": dg.MetadataValue.text(result.effect),
            "log_bytes": dg.MetadataValue.int(-1 if result.log_bytes is None else result.log_bytes),
            "warning": dg.MetadataValue.text(result.warning), "by": dg.MetadataValue.text(result.by),
            "record": dg.MetadataValue.text(f"{result.record.resumer_type} / {result.record.position_key}")})

    @dg.job(name=reset_job_name(task_id), tags={TASK_TAG: task_id},
            description=f"Reset the checkpoint of task {task_id} (run config: to latest | earliest | position). "
                        "Latest skips the changes up to the log end, earliest and older positions replay them.")
    def _job():
        reset_checkpoint_op()

    return _job
