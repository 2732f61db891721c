"""The task's resources: the engine's runtime for one config, and its Spark session, built per run and torn down after it.

A process that executes runs in process (the CLI's `snapshot`) lends them its own runtime (`lent`): one load of the
config and one runtime per process. Each run still starts on fresh connections (the lent runtime reconnects when
the run ends), so a run that failed on a lost connection leaves nothing broken for the next one.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional

import dagster as dg
from dagster_pyspark import PySparkResource
from pydantic import PrivateAttr

from cdc_assets.config import TaskConfig, load_config
from cdc_assets.defs.names import TASK_TAG
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import CdcError
from cdc_assets.spark.session import spark_settings, start_session, stop_session


class CdcTask(dg.ConfigurableResource):
    """Source, sink and resumer of one cdc_assets task: `config_path`, or, in a code location of many tasks,
    the one of `config_paths` (task_id -> file) that the run belongs to (see `run_task`)."""

    config_path: str = ""
    config_paths: dict[str, str] = {}
    _runtime: Optional[TaskRuntime] = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        path = self.config_path or self.config_paths[run_task(context.run, list(self.config_paths))]
        self._runtime = _LENT.get(path) or TaskRuntime(load_config(path))

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._runtime is not None:
            if any(self._runtime is r for r in _LENT.values()):
                self._runtime.reconnect()  # the lender closes it
            else:
                self._runtime.close()
            self._runtime = None

    @property
    def runtime(self) -> TaskRuntime:
        if self._runtime is None:
            if not self.config_path:
                raise CdcError("the cdc_task resource of a code location with many tasks knows its task only inside "
                               "a run", "use it from an asset, asset check or job of one task")
            self._runtime = TaskRuntime(load_config(self.config_path))
        return self._runtime


class TaskSpark(PySparkResource):
    """dagster-pyspark's resource, so the session's settings show in the UI's resources, with what it leaves out: our
    start-up (local jar files checked, workers on this interpreter) and a stop at the end of the run that started the session
    (a run that leaves its JVM behind holds its memory until the code server restarts; a session someone else started is
    theirs to stop). Only the snapshot assets ask for it, so the log phase's
    runs never start a JVM."""

    # The CLI runs many materializations in one process and keeps one session for all of them.
    stop_on_teardown: bool = True
    # A code location of many tasks: each task's settings by task_id, chosen by the run (see `run_task`).
    task_spark_configs: dict[str, dict[str, Any]] = {}
    _started: bool = PrivateAttr(default=False)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        settings = self.spark_config
        if self.task_spark_configs:
            settings = self.task_spark_configs[run_task(context.run, list(self.task_spark_configs))]
        self._spark_session, self._started = start_session(settings)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._spark_session is not None and self._started and self.stop_on_teardown:
            stop_session(self._spark_session)
        self._spark_session = None

    @property
    def started(self) -> bool:
        """Whether this run started the session (and so pays its first-job costs)."""
        return self._started


def run_task(run: dg.DagsterRun | None, task_ids: list[str]) -> str:
    """Which task a run belongs to, in a code location of many tasks (one `cdc_task` and one `pyspark` resource
    serve them all, so that every asset, check and job keeps asking for those two keys): the task of the assets
    or checks it selects (their keys start with the task_id), else its `cdc_assets/incremental_task` tag, else
    the task whose name prefixes its job's name (`<task_id>_incremental`, the longest that fits)."""
    if run is None:
        raise CdcError("a resource of a code location with many tasks was used outside a run",
                       "launch the task's job or materialize its assets")
    keys = [*(run.asset_selection or ()), *(c.asset_key for c in (run.asset_check_selection or ()))]
    tasks = {k.path[0] for k in keys if k.path and k.path[0] in task_ids}
    if not tasks and run.tags.get(TASK_TAG) in task_ids:
        tasks = {run.tags[TASK_TAG]}
    if not tasks:
        fitting = sorted((t for t in task_ids if run.job_name.startswith(f"{t}_")), key=len)
        tasks = set(fitting[-1:])
    if len(tasks) != 1:
        what = (f"tasks {', '.join(sorted(tasks))}" if tasks
                else f"no task of this code location ({', '.join(task_ids)})")
        raise CdcError(f"run {run.run_id} of job {run.job_name} belongs to {what}",
                       "materialize the assets of one task per run (each task is its own asset group)")
    return tasks.pop()


_LENT: dict[str, TaskRuntime] = {}  # config path -> the runtime of the process that runs it in process


@contextmanager
def lent(runtime: TaskRuntime, config_path: str) -> Iterator[None]:
    """The runs this process executes in process use `runtime` as their `cdc_task` (Dagster copies resource
    objects, so the runtime cannot travel inside one)."""
    _LENT[config_path] = runtime
    try:
        yield
    finally:
        _LENT.pop(config_path, None)


def task_spark(config: TaskConfig, stop_on_teardown: bool = True) -> TaskSpark:
    settings: dict[str, Any] = spark_settings(config.spark, app_name=f"cdc_assets:{config.task_id}")
    return TaskSpark(spark_config=settings, stop_on_teardown=stop_on_teardown)
