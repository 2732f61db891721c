"""The incremental job and the sensor that launches it.

Continuous sync as bounded runs: each run applies the log up to the log end it sees at its start, checkpoints
and exits; the sensor launches the next one while the source's log is ahead of the checkpoint. Each run is a
short, visible unit with its own figures in the UI; a daemon or webserver restart never interrupts a run that
matters, and a run that fails stays failed for a look (the run key holds the checkpoint it started from).
"""

import hashlib

import dagster as dg

from cdc_assets.config import TaskConfig, load_config
from cdc_assets.core.headroom import Level
from cdc_assets.core.positions import is_before
from cdc_assets.defs.names import TASK_TAG, asset_key
from cdc_assets.defs.resources import CdcTask
from cdc_assets.engine.headroom import task_headroom
from cdc_assets.engine.incremental import SyncReport, sync
from cdc_assets.engine.log_start import task_progress, unfinished_reason
from cdc_assets.engine.lane_states import checkpoint_text, target_checkpoints
from cdc_assets.engine.membership import membership
from cdc_assets.engine.planning import load_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import CdcError

ACTIVE = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
          dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]


def job_name(task_id: str) -> str:
    return f"{task_id}_incremental"


def incremental_job(config: TaskConfig) -> dg.JobDefinition:
    task_id = config.task_id

    @dg.op(name=f"{task_id}_sync_log", description="Apply the source log to the target up to the log end seen at "
                                                  "the start, checkpointing after each batch the target committed.")
    def sync_log(context: dg.OpExecutionContext, cdc_task: CdcTask):
        def progress(report: SyncReport) -> None:
            if report.batches % 50 == 1:
                context.log.info(f"batch {report.batches}: {report.events} changes applied, checkpoint "
                                 f"{report.checkpoint}, lag {report.lag_seconds} s")
        try:
            report = sync(cdc_task.runtime, until_caught_up=True, on_batch=progress)
        except CdcError as exc:
            # Retrying cannot bring back a purged log or answer for DDL: fail for a look, no retry.
            raise dg.Failure(description=str(exc), allow_retries=False) from None
        for line in report.lines():
            context.log.info(line)
        if report.slowest is not None:
            context.log.warning(f"{report.slow_batches} batches over checkpoint_timeout_secs; slowest: "
                                f"{report.slowest.advice()}")
        for table in config.source.table_ids:
            context.log_event(dg.AssetObservation(asset_key=asset_key(task_id, table),
                                                  metadata=_table_metadata(report, str(table))))
        return dg.Output(None, metadata=_run_metadata(report))

    @dg.job(name=job_name(task_id), tags={TASK_TAG: task_id},
            description=f"Incremental phase of task {task_id}: source log -> target, from the checkpoint.")
    def _job():
        sync_log()

    return _job


def _run_metadata(report: SyncReport) -> dict:
    return {
        "events_applied": dg.MetadataValue.int(report.events),
        "transactions": dg.MetadataValue.int(report.transactions),
        "batches": dg.MetadataValue.int(report.batches),
        "rows_written": dg.MetadataValue.int(report.rows_written),
        "skipped_in_snapshot": dg.MetadataValue.int(report.skipped),
        "started_at": dg.MetadataValue.text(report.start),
        "last_checkpoint": dg.MetadataValue.text(str(report.checkpoint)),
        "lag_seconds": dg.MetadataValue.float(-1.0 if report.lag_seconds is None else round(report.lag_seconds, 3)),
        "lag_log_bytes": dg.MetadataValue.int(-1 if report.lag_bytes is None else report.lag_bytes),
        "lag_log_unit": dg.MetadataValue.text(report.lag_unit),  # "s" for a MongoDB source, whose log has no bytes
        "schema_version": dg.MetadataValue.int(report.schema_version),
        "seconds": dg.MetadataValue.float(round(report.seconds, 3)),
        "slow_batches": dg.MetadataValue.int(report.slow_batches),
        **({"slowest_batch": dg.MetadataValue.text(report.slowest.advice()),
            "slowest_batch_target_seconds": dg.MetadataValue.float(round(report.slowest.target_secs, 3)),
            "slowest_batch_rows": dg.MetadataValue.int(report.slowest.rows)} if report.slowest else {}),
    }


def _table_metadata(report: SyncReport, table: str) -> dict:
    # One log for all tables: checkpoint and lag are the task's; the events are the table's own.
    per_target = {}
    for name, t in report.targets.items():  # several targets: each one's own figures
        per_target |= {
            f"target_{name}_events_applied": dg.MetadataValue.int(t.per_table.get(table, 0)),
            f"target_{name}_checkpoint": dg.MetadataValue.text(str(t.checkpoint)),
            f"target_{name}_lag_log_bytes": dg.MetadataValue.int(-1 if t.lag_bytes is None else t.lag_bytes),
            f"target_{name}_state": dg.MetadataValue.text(report.target_states.get(name, "applying")),
        }
    return {**_run_metadata(report), "events_applied": dg.MetadataValue.int(report.per_table.get(table, 0)),
            **per_target}


def incremental_sensor(config: TaskConfig, config_path: str, job: dg.JobDefinition) -> dg.SensorDefinition:
    @dg.sensor(name=f"{config.task_id}_incremental_launcher", job=job, minimum_interval_seconds=15,
               default_status=dg.DefaultSensorStatus.RUNNING,
               description="Launches the incremental job once every split is finished, then again while the "
                           "source's log is ahead of the checkpoint; one run at a time.")
    def _launcher(context: dg.SensorEvaluationContext):
        active = context.instance.get_run_records(
            dg.RunsFilter(job_name=job.name, statuses=ACTIVE, tags={TASK_TAG: config.task_id}), limit=1)
        if active:
            return dg.SkipReason(f"incremental run {active[0].dagster_run.run_id} is in progress")
        runtime = TaskRuntime(load_config(config_path))
        try:
            headroom = task_headroom(runtime)
            if headroom.level is Level.LOST:  # a run would only fail the same way: say the way out instead
                return dg.SkipReason(f"not launching: {headroom}")
            decision = _decide(runtime)
            if isinstance(decision, dg.SkipReason):  # how long the task may stay idle before it loses its position
                decision = dg.SkipReason(f"{decision.skip_message}; {headroom}")
            return decision
        finally:
            runtime.close()

    return _launcher


def _decide(runtime: TaskRuntime):
    targets = target_checkpoints(runtime)
    checkpoint = targets.earliest
    if checkpoint is None and runtime.config.pipeline.startup_mode == "initial":
        waiting = unfinished_reason(task_progress(runtime))
        if waiting:
            return dg.SkipReason(f"waiting for the snapshot: {waiting}")
    changed = ""
    if checkpoint is not None:
        applied = runtime.resumer.schemas(checkpoint.schema_version) or runtime.config.source.table_ids
        members = membership(runtime, applied)
        end = runtime.source.current_position()
        if not members.changed and not is_before(checkpoint.position, end):
            waiting = f"; waiting for the snapshot: {'; '.join(members.waiting)}" if members.waiting else ""
            return dg.SkipReason(f"caught up: checkpoint {checkpoint.position} is the source's log end{waiting}"
                                 + "".join(f"; {note}" for note in targets.notes))
        # A table joining or leaving needs a run even at the log end, and a key of its own.
        changed = ",".join(sorted([*map(str, members.joining), *(f"-{t}" for t in members.removed)]))
    plans = ",".join(sorted(p.plan_id for p in load_plans(runtime).values()))
    # Once per plan and checkpoint: never twice for the same start, and a new key after each run's progress.
    start = checkpoint_text(checkpoint) if checkpoint else "start"  # a rollback's checkpoint is told apart
    run_key = f"{hashlib.sha256(plans.encode()).hexdigest()[:12]}@{start}"
    # Several targets: a target back from an outage starts from an earlier position.
    run_key += f"#{hashlib.sha256(targets.key.encode()).hexdigest()[:12]}" if targets.key else ""
    return dg.RunRequest(run_key=run_key + (f"+{changed}" if changed else ""), tags={TASK_TAG: runtime.config.task_id})
