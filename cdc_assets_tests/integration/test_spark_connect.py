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
