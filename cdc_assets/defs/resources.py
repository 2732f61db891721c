"""The task's resources: the engine's runtime for one config, and its Spark session, built per run and torn down after it."""
from __future__ import annotations

from typing import Any, Optional

import dagster as dg
from dagster_pyspark import PySparkResource
from pydantic import PrivateAttr

from cdc_assets.config import TaskConfig, load_config
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.spark.session import spark_settings, start_session


class CdcTask(dg.ConfigurableResource):
    """Source, sink and resumer of one cdc_assets task."""

    config_path: str
    _runtime: Optional[TaskRuntime] = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._runtime = TaskRuntime(load_config(self.config_path))

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None

    @property
    def runtime(self) -> TaskRuntime:
        if self._runtime is None:
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
    _started: bool = PrivateAttr(default=False)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._spark_session, self._started = start_session(self.spark_config)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._spark_session is not None and self._started and self.stop_on_teardown:
            self._spark_session.stop()
        self._spark_session = None

    @property
    def started(self) -> bool:
        """Whether this run started the session (and so pays its first-job costs)."""
        return self._started


def task_spark(config: TaskConfig, stop_on_teardown: bool = True) -> TaskSpark:
    settings: dict[str, Any] = spark_settings(config.spark, app_name=f"cdc_assets:{config.task_id}")
    return TaskSpark(spark_config=settings, stop_on_teardown=stop_on_teardown)
