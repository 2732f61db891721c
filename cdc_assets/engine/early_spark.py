"""The task's Spark session started on a thread of its own while the CLI does the rest of its start-up (imports
Dagster, plans, registers partitions, builds the definitions): the JVM's start and its first job then overlap that
work instead of following it. The run's resource finds the session up and reuses it.

Nothing here reports an error: when the start or a login-checking warm-up fails, the session is stopped and the
run's own start meets the same error, and reports it as it always did."""
from __future__ import annotations

import threading

from cdc_assets.config import TaskConfig
from cdc_assets.engine.runtime import TaskRuntime


class EarlySpark:
    def __init__(self, config: TaskConfig) -> None:
        self._config = config
        self._up = threading.Event()
        self._thread = threading.Thread(target=self._start, name="cdc-spark-start", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        try:
            self._start_and_warm_up()
        finally:
            self._up.set()

    def _start_and_warm_up(self) -> None:
        from cdc_assets.spark.session import build_session, stop_session
        from cdc_assets.spark.warm_up import warm_up_source

        config = self._config
        try:
            session, started = build_session(config.spark, app_name=f"cdc_assets:{config.task_id}")
        except Exception:
            return
        if not started:
            return
        runtime = TaskRuntime(config)
        try:
            checks_login = runtime.snapshot_reads_jdbc
            if not checks_login:
                # This warm-up only starts the Python workers: the first run starts meanwhile (its Dagster start
                # overlaps the workers'), and its first job waits for them in Spark. Nothing
                # but a broken worker fails it, which that job then meets and tells.
                self._up.set()
            warm_up_source(session, runtime.source, checks_login)
        except Exception:
            if not self._up.is_set():
                stop_session(session)  # the run's start warms up again, and tells a refused login as it always did
        finally:
            runtime.close()

    def ready(self) -> None:
        """Until the session is up for the runs (or its start failed): the JVM's stderr is the process's again."""
        self._up.wait()

    def wait(self) -> None:
        """Until the start and its warm-up ended, however they ended."""
        self._thread.join()
