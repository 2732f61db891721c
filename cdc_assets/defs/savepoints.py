"""Savepoint jobs of a task: create, roll back to and delete a savepoint from the UI (Launchpad: the name, and the
targets, as run config), each run recording the savepoint on the run and as an observation of every table asset,
so the asset pages list the task's savepoints. They carry the incremental runs' tag, so the run queue never starts
one beside an incremental run of the same task (the task lease enforces it for the CLI too)."""
import dagster as dg

from cdc_assets.config import TaskConfig
from cdc_assets.defs.names import TASK_TAG, asset_key
from cdc_assets.defs.resources import CdcTask
from cdc_assets.engine import savepoints, target_savepoints
from cdc_assets.engine.savepoint_values import Savepoint, SavepointReport
from cdc_assets.errors import CdcError

ACTIONS = {
    "create": (savepoints.create_on, "Tag the target tables' state and the checkpoint as a savepoint (copies no "
                                     "table)."),
    "rollback": (savepoints.rollback_on, "Restore the target tables and the checkpoint to a savepoint; the next "
                                         "incremental run replays the log from there."),
    "delete": (savepoints.delete_on, "Drop a savepoint and the before-images only it needs."),
}


class SavepointConfig(dg.Config):
    name: str
    targets: list[str] = []  # the targets it is done on; empty: every target


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
            reports = run(runtime, config.name, config.targets or None)
            lanes = runtime.lanes_named(config.targets or None)
            every = {lane.name: target_savepoints.list_savepoints(lane) for lane in lanes}
            held = [target_savepoints.storage(lane) for lane in lanes]
        except CdcError as exc:
            raise dg.Failure(description=str(exc), allow_retries=False) from None
        for line in (line for report in reports for line in report.lines()):
            context.log.info(line)
        lines, metadata = _summary(reports, every, several=len(runtime.lanes) > 1)
        for table in runtime.config.source.table_ids:
            context.log_event(dg.AssetObservation(asset_key=asset_key(task_id, table), metadata={
                "savepoint": metadata["savepoint"], "action": metadata["action"], "position": metadata["position"],
                "savepoints": dg.MetadataValue.text("\n".join(lines) or "none"),
                "before_images": dg.MetadataValue.int(sum(h.get(str(table), 0) for h in held))}))
        return dg.Output(None, metadata=metadata)

    @dg.job(name=savepoint_job_name(task_id, action), tags={TASK_TAG: task_id},
            description=f"Savepoint {action} for task {task_id}: {text} Run config: the savepoint's name, and the "
                        "targets (default every one).")
    def _savepoint_job():
        _op()

    return _savepoint_job


def _summary(reports: list[SavepointReport], every: dict[str, list[Savepoint]], several: bool) -> tuple[list, dict]:
    """The savepoints listed (per target, with several) and the run's metadata: the savepoint as the first target
    that has it sees it, each target's report, the keys restored and the later savepoints dropped on all."""
    lines = [f"{f'{name}: ' if several else ''}{sp.line()}" for name, sps in every.items() for sp in sps]
    sp = next(r.savepoint for r in reports if r.savepoint is not None)
    restored: dict[str, int] = {}
    for report in reports:
        for table, keys in report.restored.items():
            restored[table] = restored.get(table, 0) + keys
    dropped = sorted({name for report in reports for name in report.dropped})
    return lines, {
        "savepoint": dg.MetadataValue.text(sp.name),
        "action": dg.MetadataValue.text(reports[0].action),
        "position": dg.MetadataValue.text(str(sp.position)),
        "schema_version": dg.MetadataValue.int(sp.schema_version),
        "epoch": dg.MetadataValue.int(sp.epoch),
        "seconds": dg.MetadataValue.float(round(sum(r.seconds for r in reports), 3)),
        "savepoints": dg.MetadataValue.md("\n".join(f"- {line}" for line in lines) or "none"),
        **({"targets": dg.MetadataValue.md("\n".join(f"- {line}" for r in reports for line in r.lines()))}
           if several else {}),
        **({"keys_restored": dg.MetadataValue.json(restored)} if restored else {}),
        **({"dropped_later_savepoints": dg.MetadataValue.text(", ".join(dropped))} if dropped else {}),
    }
