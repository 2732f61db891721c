"""A PostgreSQL source without logical decoding is refused at plan time, with the setting named."""
import shutil
import tempfile
from pathlib import Path

import pytest

from cdc_assets.config import parse_config
from cdc_assets.dev.postgres import PostgresServer
from cdc_assets.dev.processes import free_port
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import SourceSetupError


@pytest.fixture
def replica_level_postgres():
    base = Path(tempfile.mkdtemp(prefix="cdc-test-pg-replica-"))
    base.chmod(0o755)
    server = PostgresServer(base, free_port(), overrides=(("wal_level", "replica"),)).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_wal_level_not_logical_is_refused(tmp_path, replica_level_postgres, servers):
    config = parse_config({
        "task_id": "walcheck",
        "source": {"db_type": "postgres", "url": replica_level_postgres.url(), "tables": ["public.t"]},
        "target": {"db_type": "postgres", "url": servers.postgres.url()},
    }, tmp_path)
    runtime = TaskRuntime(config)
    with pytest.raises(SourceSetupError, match="wal_level is 'replica'.*set wal_level = logical"):
        ensure_plans(runtime)
    runtime.close()
