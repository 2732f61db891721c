"""Session fixtures: one private MariaDB and one private PostgreSQL for the whole test run."""
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from cdc_assets.dev.servers import MariaDbServer, PostgresServer, start_servers, stop_servers


@dataclass
class Servers:
    mariadb: MariaDbServer
    postgres: PostgresServer


@pytest.fixture(scope="session")
def servers():
    # Not under pytest's tmp dir: the postgres OS user must be able to reach the data directory.
    base = Path(tempfile.mkdtemp(prefix="cdc-test-servers-"))
    base.chmod(0o755)
    mariadb, postgres = start_servers(base)
    try:
        yield Servers(mariadb, postgres)
    finally:
        stop_servers(base)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def unique_name() -> str:
    """A short lowercase identifier, unique per test: databases, schemas and slots never collide."""
    return f"t_{uuid.uuid4().hex[:8]}"
