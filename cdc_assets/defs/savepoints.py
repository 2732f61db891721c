"""Savepoint jobs of a task: create, roll back to and delete a savepoint from the UI (Launchpad: the name as run
config), each run recording the savepoint on the run and as an observation of every table asset, so the asset
pages list the task's savepoints. They carry the incremental runs' tag, so the run queue never starts one beside
an incremental run of the same task (the task lease in the target enforces it for the CLI too)."""
import dagster as dg

from cdc_assets.config import TaskConfig
from cdc_assets.defs.names import TASK_TAG, asset_key
from cdc_assets.defs.resources import CdcTask
from cdc_assets.engine import savepoints
from cdc_assets.errors import CdcError

ACTIONS = {
    "create": (savepoints.create, "Tag the target tables' state and the checkpoint as a savepoint (copies no table)."),
    "rollback": (savepoints.rollback, "Restore the target tables and the checkpoint to a savepoint; the next "
                                      "incremental run replays the log from there."),
    "delete": (savepoints.delete, "Drop a savepoint and the before-images only it needs."),
}


class SavepointConfig(dg.Config):
    name: str


def savepoint_job_name(task_id: str, action: str) -> str:
    return f"{task_id}_savepoint_{action}"


def savepoint_jobs(config: TaskConfig) -> list[dg.JobDefinition]:
    return [_job(config, action) for action in ACTIONS]


def _job(task_config: TaskConfig, action: str) -> dg.JobDefinition:
    task_id = task_config.task_id
    run, text = ACTIONS[action]

    @dg.op(name=f"{task_id}_savepoint_{action}_op", description=text)
    def _op(context: dg.OpExecutionContext, config: SavepointConfig, cdc_task: CdcTask):
        runtime = cdc_task.runtime
        try:
            report = run(runtime, config.name)
            every = savepoints.list_savepoints(runtime)
            held = savepoints.storage(runtime)
        except CdcError as exc:
            raise dg.Failure(description=str(exc), allow_retries=False) from None
        for line in report.lines():
            context.log.info(line)
        listing = "\n".join(sp.line() for sp in every) or "none"
        sp = report.savepoint
        metadata = {
            "savepoint": dg.MetadataValue.text(sp.name),
            "action": dg.MetadataValue.text(report.action),
            "position": dg.MetadataValue.text(str(sp.position)),
            "schema_version": dg.MetadataValue.int(sp.schema_version),
            "epoch": dg.MetadataValue.int(sp.epoch),
            "seconds": dg.MetadataValue.float(round(report.seconds, 3)),
            "savepoints": dg.MetadataValue.md("\n".join(f"- {s.line()}" for s in every) or "none"),
            **({"keys_restored": dg.MetadataValue.json(report.restored)} if report.restored else {}),
            **({"dropped_later_savepoints": dg.MetadataValue.text(", ".join(report.dropped))} if report.dropped else {}),
        }
        for table in runtime.config.source.table_ids:
            context.log_event(dg.AssetObservation(asset_key=asset_key(task_id, table), metadata={
                "savepoint": metadata["savepoint"], "action": metadata["action"], "position": metadata["position"],
                "savepoints": dg.MetadataValue.text(listing),
                "before_images": dg.MetadataValue.int(held.get(str(table), 0))}))
        return dg.Output(None, metadata=metadata)

    @dg.job(name=savepoint_job_name(task_id, action), tags={TASK_TAG: task_id},
            description=f"Savepoint {action} for task {task_id}: {text} Run config: the savepoint's name.")
    def _savepoint_job():
        _op()

    return _savepoint_job
