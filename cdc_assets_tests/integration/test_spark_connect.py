"""A snapshot through Spark Connect (`spark.remote`): the run attaches to a long-lived server started from the
pyspark installation (dev/spark_connect.py) instead of starting a JVM; our package reaches the server's Python
workers as the session's artifact; MySQL -> PostgreSQL compared row by row with the source."""
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from pyspark import SparkContext

from cdc_assets.dev.spark_connect import SparkConnectServer
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.spark.parallelism import is_remote, parallelism
from cdc_assets.spark.pyfiles import ZIP_NAME
from cdc_assets_tests.integration.test_spark_cluster import MYSQL_SEED, assert_same_rows
from cdc_assets_tests.support import config_for, snapshot_all, source_database

pytestmark = [pytest.mark.connect, pytest.mark.spark]


@pytest.fixture(scope="module")
def connect_server():
    base = Path(tempfile.mkdtemp(prefix="cdc-test-spark-connect-"))
    server = SparkConnectServer(base, cores="2", driver_memory="1g").start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_snapshot_attaches_to_the_connect_server(tmp_path, servers, connect_server, unique_name):
    """No SparkContext in this process for the run's session (a process-local JVM would have one); the server's
    Python workers import cdc_assets from the zip the session shipped (the server has no PYTHONPATH: without the
    zip they import whatever copy their interpreter has installed, or none); every row arrives as the source has
    it: tabs, newlines, backslashes, NULLs, bytes with NUL, timestamps."""
    active = SparkContext._active_spark_context
    if active is not None:  # the `spark` fixture's local one: this test shows the run starts none
        active.stop()
    pg_db = f"{unique_name}_tgt"
    servers.postgres.create_database(pg_db)
    target_conn = servers.postgres.connect(pg_db)
    try:
        with source_database(servers, "mysql", unique_name, MYSQL_SEED) as source_conn:
            config = config_for(tmp_path, servers, task_id=f"sc_{unique_name}", source="mysql", source_db=unique_name,
                                tables=[f"{unique_name}.events"], target="postgres", target_db=pg_db,
                                snapshot={"split_size": 500}, spark={"conf": {"spark.remote": connect_server.url}})
            rt = TaskRuntime(config)
            try:
                snapshot_all(rt)
                session = rt.spark
                assert is_remote(session) and SparkContext._active_spark_context is None
                assert parallelism(session) == 2

                def where(batches):
                    import pyarrow as pa

                    import cdc_assets

                    for _ in batches:
                        yield pa.RecordBatch.from_pydict({"module": [cdc_assets.__file__], "cwd": [os.getcwd()]})

                seen = session.range(0, 4, 1, 4).mapInArrow(where, "module string, cwd string").collect()
                for row in seen:
                    assert f"{ZIP_NAME}{os.sep}cdc_assets{os.sep}__init__.py" in row.module, row.module
                    assert row.cwd.startswith(str(connect_server.base)), row.cwd
            finally:
                rt.close()
            assert_same_rows(source_conn, "mysql", target_conn, "postgres", unique_name)
    finally:
        target_conn.close()


ATTACH = """
import json, sys
from cdc_assets.spark.session import attach_session, is_shared
session, started = attach_session({"spark.remote": sys.argv[1], "spark.app.name": sys.argv[2],
                                   "spark.sql.session.timeZone": "UTC"})
def pid(batches):
    import os
    import pyarrow as pa
    for batch in batches:
        yield pa.RecordBatch.from_pydict({"pid": [os.getpid()] * batch.num_rows})
pids = sorted({r[0] for r in session.range(0, 2, 1, 1).mapInArrow(pid, "pid long").collect()})
print(json.dumps({"session": session.session_id, "shared": is_shared(session), "pids": pids}))
session.stop()
"""


def _attach(server, app: str) -> dict:
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", ATTACH, server.url, app], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_runs_of_a_task_share_one_server_session_and_its_python_workers(connect_server, unique_name):
    """Two processes of one task (two Dagster runs) attach to the same server session, whose Python worker the
    second reuses instead of starting its own; another task gets a session of its own. A session someone released
    is refused by the server for good: the next run then takes a fresh one of its own and still runs."""
    from cdc_assets.spark.session import REMOTE, _open, _with_session_id, shared_session_id

    first, second = _attach(connect_server, f"cdc_assets:{unique_name}"), _attach(connect_server, f"cdc_assets:{unique_name}")
    assert first["shared"] and first["session"] == second["session"]
    assert first["pids"] == second["pids"]  # the worker the first run started
    other = _attach(connect_server, f"cdc_assets:{unique_name}_other")
    assert other["session"] != first["session"] and other["pids"] != first["pids"]

    settings = {REMOTE: connect_server.url, "spark.app.name": f"cdc_assets:{unique_name}_released",
                "spark.sql.session.timeZone": "UTC"}
    released = _open(settings, _with_session_id(connect_server.url, shared_session_id(settings)), False, False)
    released.range(1).collect()
    released.stop()  # releases it on the server
    after = _attach(connect_server, f"cdc_assets:{unique_name}_released")
    assert not after["shared"] and after["session"] != shared_session_id(settings) and after["pids"]
