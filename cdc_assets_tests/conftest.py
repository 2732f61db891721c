"""Session fixtures: one private MariaDB and one private PostgreSQL for the whole test run."""
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from cdc_assets.config import SparkConfig
from cdc_assets.dev.servers import MariaDbServer, PostgresServer, running_servers


@dataclass
class Servers:
    mariadb: MariaDbServer
    postgres: PostgresServer
    base_dir: Path


@pytest.fixture(scope="session")
def servers():
    # Not under pytest's tmp dir: that is root-only (0700), and the postgres OS user must reach its data.
    base_dir = Path(tempfile.mkdtemp(prefix="cdc-test-servers-"))
    try:
        with running_servers(base_dir) as (mariadb, postgres):
            yield Servers(mariadb, postgres, base_dir)
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)


@pytest.fixture
def unique_name() -> str:
    """A short lowercase identifier, unique per test: databases, schemas and slots never collide."""
    return f"t_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for every in-process test: starting one costs seconds."""
    from cdc_assets.spark.session import build_session

    session, _ = build_session(SparkConfig(master="local[2]", driver_memory="1g"), app_name="cdc_assets_tests")
    yield session
    session.stop()
