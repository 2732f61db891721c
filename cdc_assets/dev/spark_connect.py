"""A long-lived Spark Connect server on loopback, started from the pyspark installation: runs attach to it with
`spark.remote: sc://127.0.0.1:<port>` instead of starting a JVM each (the `connect` tests, bench/backfill.py,
`cdc-assets spark-connect-server`).

The server is `spark-submit --class SparkConnectServer` with master `local[*]`, the JDBC jars and the settings our
own sessions start with (UTC, the log4j configuration); it is the leader of its own process group, so that
stopping it also ends the Python workers it started, and runs without this process's PYTHONPATH: like a server on
another host, its Python workers must get our code from the client (`addArtifacts`, spark/pyfiles.py).
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cdc_assets.config import DEBIAN_JARS
from cdc_assets.dev.processes import START_TIMEOUT, free_port, pyspark_home, stop_groups, tail, wait_for

SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"
HOST = "127.0.0.1"


@dataclass
class SparkConnectServer:
    base: Path  # its log, work and temp folders
    port: int = 0  # 0: a free loopback port
    cores: str = "*"
    jars: tuple[str, ...] = DEBIAN_JARS
    driver_memory: str = "2g"
    conf: dict[str, str] = field(default_factory=dict)
    _process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"sc://{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's process (its group's leader), while it runs."""
        return self._process.pid if self._process is not None else None

    @property
    def log(self) -> Path:
        return self.base / "connect-server.log"

    def command(self) -> list[str]:
        from cdc_assets.spark.session import JVM_OPTIONS

        conf = {
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.extraJavaOptions": JVM_OPTIONS,
            "spark.executor.extraJavaOptions": JVM_OPTIONS,
            "spark.sql.session.timeZone": "UTC",
            "spark.local.dir": str(self.base / "tmp"),
            # Said explicitly, so that a session reads its group width from the conf instead of running a job.
            "spark.default.parallelism": str(os.cpu_count() if self.cores == "*" else self.cores),
            **self.conf,
        }
        args = [str(Path(pyspark_home()) / "bin" / "spark-submit"), "--class", SERVER,
                "--master", f"local[{self.cores}]", "--driver-memory", self.driver_memory,
                "--name", "cdc_assets Spark Connect server"]
        if self.jars:
            args += ["--jars", ",".join(self.jars)]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        return args

    def start(self, timeout: float = START_TIMEOUT) -> SparkConnectServer:
        """Start the server; return once its port accepts connections."""
        missing = [jar for jar in self.jars if not Path(jar).is_file()]
        if missing:
            raise FileNotFoundError(f"JDBC jars missing: {missing} (scripts/install-deps.sh)")
        (self.base / "tmp").mkdir(parents=True, exist_ok=True)
        (self.base / "conf").mkdir(exist_ok=True)
        self.port = self.port or free_port()
        env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "SPARK_CONNECT_MODE_ENABLED")}
        env.update(SPARK_LOCAL_IP=HOST, PYSPARK_PYTHON=sys.executable, SPARK_CONF_DIR=str(self.base / "conf"),
                   TMPDIR=str(self.base / "tmp"))
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                             cwd=self.base, start_new_session=True)
        if not wait_for(lambda: self._answers() or self._process.poll() is not None, timeout) or not self._answers():
            self.stop()
            raise RuntimeError(f"the Spark Connect server on port {self.port} did not answer within {timeout:.0f} s:"
                               f"\n{tail(self.log)}")
        return self

    def _answers(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=1):
                return True
        except OSError:
            return False

    def wait(self) -> int:
        """Block until the server exits (the CLI command); its exit code."""
        return self._process.wait() if self._process is not None else 0

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL what is left after 10 s (Python workers included)."""
        process, self._process = self._process, None
        if process is not None:
            stop_groups([process])

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

