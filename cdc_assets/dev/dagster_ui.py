"""The Dagster UI for a task (`cdc-assets ui`): what `dagster dev` starts, a webserver and a daemon on one
instance, with the daemon's backfill loop at `backfill_interval` seconds instead of Dagster's 30 (defs/daemon.py).

Each process leads its own process group, so stopping one also ends the code servers it started. Runs are not
stopped: the run launcher starts each in a session of its own, as under `dagster dev`, and a run outlives the UI.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from cdc_assets.config import CONFIG_ENV
from cdc_assets.dev.processes import START_TIMEOUT, stop_groups, tail, wait_for
from cdc_assets.errors import CdcError

WORKSPACE = """load_from:
  - python_module:
      module_name: cdc_assets.definitions
      location_name: cdc_assets
"""


@dataclass
class DagsterUi:
    home: Path  # DAGSTER_HOME: its dagster.yaml, storage, and the processes' logs
    env: dict[str, str]  # the processes' environment (ui_env)
    host: str = "127.0.0.1"
    port: int = 3000
    backfill_interval: float = 1.0
    workspace: Path | None = None  # None: one code location, cdc_assets.definitions
    _processes: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)  # webserver, daemon

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = START_TIMEOUT) -> DagsterUi:
        workspace = self.workspace
        if workspace is None:
            workspace = self.home / "workspace.yaml"
            workspace.write_text(WORKSPACE)
        commands = {
            "webserver": [sys.executable, "-m", "dagster_webserver", "-h", self.host, "-p", str(self.port)],
            "daemon": [sys.executable, "-m", "cdc_assets.defs.daemon", "--backfill-interval",
                       str(self.backfill_interval), "run"],
        }
        for name, command in commands.items():
            with (self.home / f"{name}.log").open("ab") as log:
                # In the caller's folder, as `dagster dev`: Dagster reads a `.env` there.
                self._processes[name] = subprocess.Popen([*command, "-w", str(workspace)], env=self.env, stdout=log,
                                                         stderr=subprocess.STDOUT, start_new_session=True)
        if not wait_for(lambda: self._answers() or self.exited() is not None, timeout) or not self._answers():
            self.stop()
            raise CdcError(f"the Dagster webserver did not answer at {self.url}; the end of its log:\n"
                           f"{tail(self.home / 'webserver.log', 1500)}",
                           "another process may hold the port: choose one with --port")
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/server_info", timeout=5) as reply:
                return reply.status == 200
        except OSError:
            return False

    def exited(self) -> str | None:
        """The name of a process that has exited, if any."""
        return next((name for name, process in self._processes.items() if process.poll() is not None), None)

    def wait(self) -> int:
        """Until one process exits; its exit code."""
        while (name := self.exited()) is None:
            time.sleep(0.5)
        return self._processes[name].returncode

    def stop(self) -> None:
        stop_groups(list(self._processes.values()), grace=20)
        self._processes.clear()


def ui_env(home: Path, config: str | None) -> dict[str, str]:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    if config:
        env[CONFIG_ENV] = config
    return env
