"""The task resource: the engine's runtime for one config, built per run and torn down after it."""
from __future__ import annotations

from typing import Optional

import dagster as dg
from pydantic import PrivateAttr

from cdc_assets.config import load_config
from cdc_assets.engine.runtime import TaskRuntime


class CdcTask(dg.ConfigurableResource):
    """Source, sink, resumer and Spark session of one cdc_assets task."""

    config_path: str
    # The CLI runs many materializations in one process and keeps one Spark session for all of them.
    stop_spark_on_teardown: bool = True
    _runtime: Optional[TaskRuntime] = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._runtime = TaskRuntime(load_config(self.config_path))

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._runtime is not None:
            self._runtime.close(stop_spark=self.stop_spark_on_teardown)
            self._runtime = None

    @property
    def runtime(self) -> TaskRuntime:
        if self._runtime is None:
            self._runtime = TaskRuntime(load_config(self.config_path))
        return self._runtime
