"""Session fixtures: one private MariaDB and one private PostgreSQL for the whole test run.

Markers: a test that uses the `spark` fixture is marked `spark` here; one that starts Spark another way (a CLI
snapshot in a process of its own) says so with `pytestmark = pytest.mark.spark`. `pytest -m "not spark and not
crash"` is then the fast lane, and a test that starts Spark in process without the marker fails.
"""
import shutil
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from cdc_assets.config import SparkConfig
from cdc_assets.dev.mariadb import MariaDbServer
from cdc_assets.dev.postgres import PostgresServer
from cdc_assets.dev.processes import free_port
from cdc_assets.dev.servers import running_servers


@dataclass
class Servers:
    mariadb: MariaDbServer
    postgres: PostgresServer
    base_dir: Path


def pytest_collection_modifyitems(items):
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


def _spark_running() -> bool:
    pyspark = sys.modules.get("pyspark")
    return pyspark is not None and pyspark.SparkContext._active_spark_context is not None


@pytest.fixture(autouse=True)
def _spark_only_when_marked(request):
    """Keeps the fast lane fast: an unmarked test that leaves a Spark context behind fails, naming the marker."""
    running = _spark_running()
    yield
    if not running and _spark_running() and request.node.get_closest_marker("spark") is None:
        pytest.fail(f"{request.node.nodeid} started Spark: mark it with pytest.mark.spark", pytrace=False)


@pytest.fixture(scope="session")
def servers():
    # Not under pytest's tmp dir: that is root-only (0700), and the postgres OS user must reach its data.
    base_dir = Path(tempfile.mkdtemp(prefix="cdc-test-servers-"))
    try:
        with running_servers(base_dir) as (mariadb, postgres):
            try:
                yield Servers(mariadb, postgres, base_dir)
            finally:
                for server in (postgres, mariadb):  # a source restart gave it a pid servers.json does not hold
                    server.stop()
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def mariadb_target(servers):
    """A second private MariaDB, for MySQL -> MySQL tasks: a table and its target share a database name, so they
    cannot share a server."""
    server = MariaDbServer(servers.base_dir / "mariadb_target", free_port()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_target(servers, unique_name):
    """(name, autocommit connection) of a fresh PostgreSQL target database named after the test."""
    from cdc_assets_tests.support import postgres_target

    name = f"{unique_name}_tgt"
    conn = postgres_target(servers, name)
    yield name, conn
    conn.close()


@pytest.fixture
def unique_name() -> str:
    """A short lowercase identifier, unique per test: databases, schemas and slots never collide."""
    return f"t_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def _local_sessions():
    """The local sessions `spark` started; the last one is stopped at the end of the run."""
    sessions = []
    yield sessions
    if sessions:
        sessions[-1].stop()


@pytest.fixture
def spark(_local_sessions):
    """One local Spark session for every in-process test: starting one costs seconds. A new one only once a
    `cluster` test stopped it (a process has one SparkContext, and those tests need theirs on the cluster)."""
    from cdc_assets.spark.session import build_session

    if not _local_sessions or not _spark_running():
        session, _ = build_session(SparkConfig(master="local[2]", driver_memory="1g"), app_name="cdc_assets_tests")
        _local_sessions.append(session)
    return _local_sessions[-1]


@pytest.fixture(autouse=True)
def _drop_replication_slots(request):
    """Planning a PostgreSQL task creates its slot, cluster-wide and named after the task: tests reuse task ids
    across databases, so each test leaves no slot behind (and no WAL held for it)."""
    yield
    if "servers" not in request.fixturenames:
        return
    conn = request.getfixturevalue("servers").postgres.connect()
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                        "WHERE slot_name LIKE 'cdc\\_assets\\_%' AND NOT active")
    finally:
        conn.close()
