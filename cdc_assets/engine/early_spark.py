"""The task's Spark session started on a thread of its own while the CLI does the rest of its start-up (imports
Dagster, plans, registers partitions, builds the definitions): the JVM's start and its first job then overlap that
work instead of following it. The run's resource finds the session up and reuses it.

Nothing here reports an error: when the start or the warm-up fails, the session is stopped and the run's own start
meets the same error, and reports it as it always did."""
from __future__ import annotations

import threading

from cdc_assets.config import TaskConfig
from cdc_assets.engine.runtime import TaskRuntime


class EarlySpark:
    def __init__(self, config: TaskConfig) -> None:
        self._config = config
        self._thread = threading.Thread(target=self._start, name="cdc-spark-start", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        from cdc_assets.spark.session import build_session, warm_up_source

        config = self._config
        try:
            session, started = build_session(config.spark, app_name=f"cdc_assets:{config.task_id}")
        except Exception:
            return
        if not started:
            return
        runtime = TaskRuntime(config)
        try:
            warm_up_source(session, runtime.source, runtime.snapshot_reads_jdbc)
        except Exception:
            session.stop()  # the run's start warms up again, and tells a refused login as it always did
        finally:
            runtime.close()

    def wait(self) -> None:
        """Until the start ended (the JVM's stderr is the process's again), however it ended."""
        self._thread.join()
