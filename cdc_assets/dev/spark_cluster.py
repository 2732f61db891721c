"""A private Spark standalone cluster on loopback: a master and workers started from the pyspark installation,
their logs and work folders under one folder (the `cluster` tests; trying `spark.master: spark://...` by hand).

Each process is the leader of its own process group, so that stopping it also ends the executor JVMs and the
Python workers a worker started. Workers run without this process's PYTHONPATH: like a cluster's hosts, they
must get our code from the driver (spark/pyfiles.py), not from a checkout they happen to see.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from cdc_assets.dev.processes import START_TIMEOUT, free_port, pyspark_home, stop_groups, tail, wait_for

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
HOST = "127.0.0.1"


@dataclass
class SparkCluster:
    base: Path
    workers: int = 2
    cores: int = 1  # per worker
    memory: str = "1g"  # per worker: what its executor may take (spark.executor.memory defaults to 1g)
    port: int = 0
    webui_port: int = 0
    _processes: list[subprocess.Popen] = field(default_factory=list, repr=False)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://{HOST}:{self.webui_port}"

    def worker_dir(self, n: int) -> Path:
        """Where worker `n` runs its executors: `<app id>/<executor id>/` holds each one's fetched jars and files."""
        return self.base / f"worker{n}"

    def start(self) -> SparkCluster:
        """Start the master and the workers; return once the master reports every worker ALIVE."""
        self.base.mkdir(parents=True, exist_ok=True)
        # All ports taken before any JVM binds one: free_port() may hand out a port again until it is bound, and
        # a worker's UI on the master's UI port would answer the status requests (a CI run saw it).
        ports: list[int] = []
        while len(ports) < 2 + self.workers:
            if (port := free_port()) not in ports:
                ports.append(port)
        self.port, self.webui_port, *worker_ports = ports
        try:
            self._spawn("master", MASTER, "--host", HOST, "--port", str(self.port),
                        "--webui-port", str(self.webui_port))
            for n, ui_port in enumerate(worker_ports):
                self._spawn(f"worker{n}", WORKER, self.master_url, "--host", HOST, "--cores", str(self.cores),
                            "--memory", self.memory, "--webui-port", str(ui_port),
                            "--work-dir", str(self.worker_dir(n)))
            if not wait_for(lambda: self.alive_workers() == self.workers, START_TIMEOUT):
                raise RuntimeError(f"the Spark master on port {self.port} has {self.alive_workers()} of "
                                   f"{self.workers} workers ALIVE after {START_TIMEOUT:.0f} s:\n"
                                   + "\n".join(tail(log, 1500) for log in sorted(self.base.glob("*.log"))))
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, main_class: str, *args: str) -> None:
        spark_class = Path(pyspark_home()) / "bin" / "spark-class"
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        env.update(SPARK_LOCAL_IP=HOST, PYSPARK_PYTHON=sys.executable,
                   SPARK_CONF_DIR=str(self.base / "conf"))  # an empty conf: no spark-env.sh of the machine's
        (self.base / "conf").mkdir(exist_ok=True)
        with (self.base / f"{name}.log").open("ab") as log:
            self._processes.append(subprocess.Popen([str(spark_class), main_class, *args], stdout=log,
                                                    stderr=subprocess.STDOUT, env=env, start_new_session=True))

    def state(self) -> dict:
        """The master's JSON status (`/json/`): workers, cores, active and completed applications; {} while it
        does not answer."""
        try:
            with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=2) as reply:
                return json.load(reply)
        except (OSError, ValueError):  # not up yet, or another process's page on the port: start() times out
            return {}

    def alive_workers(self) -> int:
        return sum(1 for worker in self.state().get("workers", []) if worker.get("state") == "ALIVE")

    def stop(self) -> None:
        """SIGTERM each process group (workers first: each stops its executors), SIGKILL what is left after 10 s."""
        stop_groups(list(reversed(self._processes)))
        self._processes.clear()

