"""The Spark session: JDBC drivers from local jar files (never Maven), UTC everywhere, stopped on exit."""
from __future__ import annotations

import os
import sys
import threading
import time
import uuid
import weakref
from contextlib import contextmanager
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from cdc_assets.config import SparkConfig
from cdc_assets.errors import ConfigError
from cdc_assets.spark.class_archive import archive_option, settle_at_exit
from cdc_assets.spark.pyfiles import is_local, package_digest, ship_package

REMOTE = "spark.remote"
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
JVM_STDERR_ENV = "CDC_ASSETS_SPARK_STDERR"  # a file for the JVM's stderr (the CLI without --verbose)
JVM_OPTIONS = f"-Duser.timezone=UTC -Dlog4j2.configurationFile={_LOG_CONFIG}"
# The driver's JIT stops at C1: a snapshot's driver lives seconds to minutes, and C2's compiling took more CPU than
# its code saved (docs/architecture/spark-driver.md).
_DRIVER_OPTIONS = f"{JVM_OPTIONS} -XX:TieredStopAtLevel=1"
_DAEMON = "spark.python.daemon.module"


def spark_settings(config: SparkConfig, app_name: str = "cdc_assets") -> dict[str, str]:
    """Every setting of the task's session, as one flat dict: what dagster-pyspark's resource shows in the UI."""
    settings = {
        "spark.master": config.master,
        "spark.app.name": app_name,
        "spark.jars": ",".join(config.jars),
        "spark.driver.memory": config.driver_memory,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": _DRIVER_OPTIONS,
        "spark.executor.extraJavaOptions": JVM_OPTIONS,
        "spark.sql.shuffle.partitions": "4",
        # Spark pads CHAR(n) reads to n; values must arrive as the source returns them.
        "spark.sql.legacy.charVarcharAsString": "true",
    }
    # Local workers are children of this interpreter, which has our daemon; an executor elsewhere may have no
    # cdc_assets but the zip shipped to it, which its daemon must not shadow. Said for every master: a session
    # started after another in the same JVM inherits the first one's settings (they are its system properties).
    settings[_DAEMON] = "cdc_assets.spark.worker_daemon" if is_local(config.master) else "pyspark.daemon"
    return {**settings, **{key: str(value) for key, value in config.conf.items()}}


def start_session(settings: dict[str, str]) -> tuple[SparkSession, bool]:
    """The session, and whether it was started now (False: an already running one was reused)."""
    if settings.get(REMOTE):
        return attach_session(settings)
    # Files on the driver only: Spark serves spark.jars to every executor, which fetches and loads them.
    jars = [j for j in settings.get("spark.jars", "").split(",") if j]
    missing = [j for j in jars if not Path(j).is_file()]
    if missing:
        raise ConfigError(
            f"spark.jars lists files that do not exist: {missing}",
            "install libmariadb-java and libpostgresql-jdbc-java (scripts/install-deps.sh) or fix spark.jars")
    # Workers must run this interpreter (the one with pyarrow), not whatever python3 is first on PATH. On a cluster
    # the executors start this same path: each host needs it (docs/operations/spark-cluster.md).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if is_local(settings.get("spark.master", "local[*]")):
        # Local mode talks to itself over loopback. A cluster's executors must reach the driver: its address is
        # the user's (spark.driver.host / spark.driver.bindAddress, or SPARK_LOCAL_IP).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    archive = None
    if SparkContext._gateway is None:  # a JVM starts now (a stopped session's JVM stays up, and is reused)
        option, archive = archive_option(settings.get("spark.jars", ""))
        if option:
            key = "spark.driver.extraJavaOptions"
            settings = {**settings, key: f"{settings.get(key, '')} {option}".strip()}
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    started = SparkContext._active_spark_context is None  # getOrCreate has no public "did I create it"
    with _jvm_stderr(os.environ.get(JVM_STDERR_ENV) if started else None):
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if archive is not None:
        settle_at_exit(SparkContext._gateway, archive)
    if started:
        ship_package(session)
    return session, started


def attach_session(settings: dict[str, str]) -> tuple[SparkSession, bool]:
    """A Spark Connect session on the long-lived server `spark.remote` names: no JVM in this process.

    Only SQL settings apply per session (UTC, CHAR as read); the server's own (its master, the JDBC jars, JVM
    options) are its command line's (docs/operations/spark-connect.md). Each new session gets our package as an artifact,
    which the server puts on the session's Python workers' `sys.path`.

    The runs of one task share one server session (`shared_session_id`): a server starts Python workers per
    session, and in a backfill of short runs each run paid its own workers' start (their imports), about a second
    of CPU per worker, more than its rows cost. The session is never released (`stop()` only closes this client's
    channel), since the server refuses a released session's id ever after."""
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    started = RemoteSession.getActiveSession() is None and RemoteSession._get_default_session() is None
    remote = settings[REMOTE]
    shared = started and "session_id=" not in remote
    try:
        try:
            session = _open(settings, _with_session_id(remote, shared_session_id(settings)) if shared else remote,
                            started, shared)
        except Exception as exc:
            # The shared session expired on the server (idle past its timeout) or someone released it: the server
            # refuses its id for good, so this run takes a session of its own.
            if not (shared and "SESSION_CLOSED" in str(exc)):
                raise
            _forget_default(RemoteSession)
            session = _open(settings, remote, started, shared=False)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"Spark Connect server {remote} is not reachable: {str(exc).splitlines()[0]}",
                          "start it (cdc-assets spark-connect-server) or fix spark.remote") from exc
    return session, started


def _open(settings: dict[str, str], remote: str, started: bool, shared: bool):
    """The session at `remote` with the task's SQL settings; a new one (`started`) gets our package. A shared one is
    never released by this process."""
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    builder = RemoteSession.builder.remote(remote)
    for key, value in settings.items():
        if key.startswith("spark.sql."):
            builder = builder.config(key, value)
    session = builder.getOrCreate()
    if shared:
        session.release_session_on_close = False
        _SHARED.add(session)
    if started:
        ship_package(session)
    return session


def _forget_default(remote_session_class) -> None:
    """The refused session is this process's default and active one (set before its first call failed): stopped
    without releasing it, so that the next builder creates another."""
    for session in (remote_session_class.getActiveSession(), remote_session_class._get_default_session()):
        if session is not None:
            session.release_session_on_close = False
            session.stop()


_SHARED: weakref.WeakSet = weakref.WeakSet()


def is_shared(session: SparkSession) -> bool:
    """A Spark Connect session other runs of the task use at the same time: its settings are not this run's to
    change."""
    return session in _SHARED


def shared_session_id(settings: dict[str, str]) -> str:
    """The server session the runs of one task share: the same for the same server, task (app name), SQL settings
    and package (a run with other code must not import a session's older copy: a different package is a different
    session), within the same hour. The hour bounds a session's life below the server's default idle timeout
    (60 min), after which the server refuses its id; a shorter timeout falls back to a session per run."""
    key = "|".join([settings[REMOTE], settings.get("spark.app.name", ""), package_digest(),
                    *sorted(f"{k}={v}" for k, v in settings.items() if k.startswith("spark.sql.")),
                    str(int(time.time() // 3600))])
    return str(uuid.uuid5(uuid.NAMESPACE_URL, key))


def _with_session_id(remote: str, session_id: str) -> str:
    # sc://host:port/;param=value;...: the connection string's parameters follow the first "/;".
    return f"{remote};session_id={session_id}" if "/;" in remote else f"{remote.rstrip('/')}/;session_id={session_id}"


@contextmanager
def _jvm_stderr(path: str | None):
    """The JVM (and the Python workers it starts) inherit stderr when launched: pointed at `path` meanwhile, what
    they print (the JVM's own start-up warnings, Spark's errors) goes to that file instead of the CLI's stderr."""
    if not path:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def stop_session(session) -> None:
    """`session.stop()`, without waiting for PySpark's accumulator server to notice. Its handler polls for the stop
    once a second, and `SparkContext.stop` waited for it, doing nothing, for most of the time a stop took. The server is told to stop and ends on a thread of its own within the second; a process that exits
    meanwhile loses nothing (it sums accumulators, we use none, and no task runs once the JVM's context stopped)."""
    _stop(session.stop, getattr(session, "_sc", None))  # a Connect session has no context, nor this server


def stop_context(context: SparkContext) -> None:
    """`stop_session` for the context alone (its session was never ours to hold)."""
    _stop(context.stop, context)


def _stop(stop, context) -> None:
    server = getattr(context, "_accumulatorServer", None)  # no public handle
    if server is not None:
        context._accumulatorServer = None  # so that `stop` skips its waiting shutdown
    try:
        stop()
    finally:
        if server is not None:
            threading.Thread(target=server.shutdown, name="cdc-spark-accumulators-stop", daemon=True).start()


def build_session(config: SparkConfig, app_name: str = "cdc_assets") -> tuple[SparkSession, bool]:
    return start_session(spark_settings(config, app_name))
