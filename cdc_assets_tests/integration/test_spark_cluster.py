"""A real Spark standalone cluster (a master and two workers on loopback, dev/spark_cluster.py) instead of
local[*]: the JDBC jars and our Python package reach the executors, the executors read the source and write the
target's staging tables, the driver commits; then the log phase (driver only) applies changes made since.
MySQL -> PostgreSQL and PostgreSQL -> MariaDB, compared row by row with the source."""
import json
import os
import shutil
import tempfile
import urllib.request
from pathlib import Path

import pytest
from pyspark import SparkContext

from cdc_assets.config import SparkConfig
from cdc_assets.dev.processes import free_port
from cdc_assets.dev.spark_cluster import SparkCluster
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.spark.pyfiles import ZIP_NAME
from cdc_assets_tests.support import config_for, fetch_rows, run_transactions, snapshot_all, source_database

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

ROWS, SPLIT = 3000, 500  # six splits: groups of four and two on the cluster's two cores (two splits per slot)

# Every fourth note NULL, the others with a tab, a newline and a backslash (COPY's escapes); bytes with NUL, tab,
# newline and backslash; timestamps with microseconds.
MYSQL_SEED = [
    "CREATE TABLE events (id INT PRIMARY KEY, note TEXT, payload VARBINARY(16), at DATETIME(6), "
    "stamped TIMESTAMP(6) NULL, amount DECIMAL(12,3))",
    "INSERT INTO events SELECT seq, CASE seq % 4 WHEN 0 THEN NULL ELSE CONCAT('tab\\tline\\nslash\\\\ ', seq) END, "
    "CONCAT(UNHEX('00090A5C'), UNHEX(LPAD(HEX(seq % 256), 2, '0'))), "
    "TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND + INTERVAL seq MICROSECOND, "
    "TIMESTAMP '2024-06-01 12:00:00' + INTERVAL seq MINUTE, seq / 7 "
    f"FROM seq_1_to_{ROWS}",
]
POSTGRES_SEED = [
    "CREATE SCHEMA {ns}",
    "CREATE TABLE {ns}.events (id INT PRIMARY KEY, note TEXT, payload BYTEA, at TIMESTAMP(6), "
    "stamped TIMESTAMPTZ(6), amount NUMERIC(12,3))",
    "INSERT INTO {ns}.events SELECT g, CASE WHEN g % 4 = 0 THEN NULL ELSE E'tab\\tline\\nslash\\\\ ' || g END, "
    "'\\x00090a5c'::bytea || set_byte('\\x00'::bytea, 0, g % 256), "
    "TIMESTAMP '2024-01-01' + g * INTERVAL '1 second 1 microsecond', "
    "TIMESTAMPTZ '2024-06-01 12:00:00+00' + g * INTERVAL '1 minute', g / 7.0 "
    f"FROM generate_series(1, {ROWS}) g",
]


def changes(ns: str, binary: str) -> list[str]:
    """Source transactions for the log phase; `binary`: the dialect's bytes literal for NUL, tab, newline."""
    return [
        f"INSERT INTO {ns}.events VALUES ({ROWS + 1}, 'new\there', {binary}, '2025-02-03 04:05:06.789', "
        f"'2025-02-03 04:05:06', 1.5); UPDATE {ns}.events SET note = NULL, amount = 0 WHERE id <= 40",
        f"DELETE FROM {ns}.events WHERE id BETWEEN 1000 AND 1100",
        f"UPDATE {ns}.events SET note = 'moved\nline', payload = NULL WHERE id = 2999",
    ]


@pytest.fixture(scope="module")
def cluster():
    base = Path(tempfile.mkdtemp(prefix="cdc-test-spark-cluster-"))
    started = SparkCluster(base, workers=2).start()
    try:
        yield started
    finally:
        started.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster_spark(cluster):
    """A session on the cluster, its driver UI on (for the executors' task counts). A process has one
    SparkContext: the local one of the `spark` fixture is stopped first (that fixture starts a new one when next
    asked), and this one is stopped after the module, leaving none."""
    from cdc_assets.spark.session import build_session

    active = SparkContext._active_spark_context
    if active is not None:
        active.stop()
    ui_port = free_port()
    session, started = build_session(
        SparkConfig(master=cluster.master_url, driver_memory="1g",
                    conf={"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                          "spark.ui.enabled": "true", "spark.ui.port": str(ui_port), "spark.executor.memory": "1g"}),
        app_name="cdc_assets_cluster_tests")
    assert started
    try:
        yield session
    finally:
        session.stop()


def executor_tasks(session) -> dict[str, int]:
    """Completed tasks per executor id ("driver" included), from the driver's REST API."""
    sc = session.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/allexecutors"
    with urllib.request.urlopen(url, timeout=10) as reply:
        return {e["id"]: e["completedTasks"] for e in json.load(reply)}


def test_the_session_runs_on_the_cluster_with_our_code_and_jars(cluster, cluster_spark):
    """The master lists the application with both workers' cores; each task runs in a worker's executor folder,
    imports cdc_assets from the zip the driver shipped (the workers have no PYTHONPATH), and the executors fetched
    the JDBC jars of spark.jars."""
    sc = cluster_spark.sparkContext
    apps = [a for a in cluster.state()["activeapps"] if a["id"] == sc.applicationId]
    assert apps and apps[0]["cores"] == 2, cluster.state()["activeapps"]

    def where(_):
        import cdc_assets

        yield os.getcwd(), cdc_assets.__file__

    seen = set(sc.parallelize(range(8), 8).mapPartitions(where).collect())
    worker_dirs = [str(cluster.worker_dir(n)) for n in range(2)]
    for cwd, module in seen:
        assert any(cwd.startswith(d + os.sep) for d in worker_dirs), cwd
        assert f"{ZIP_NAME}{os.sep}cdc_assets{os.sep}__init__.py" in module, module
    for jar in ("mariadb-java-client.jar", "postgresql.jar"):
        assert list(cluster.base.glob(f"worker*/{sc.applicationId}/*/{jar}")), f"no executor fetched {jar}"


@pytest.fixture
def target(request, servers, unique_name):
    """(db_type, database, connection): PostgreSQL for a MySQL source, the session's MariaDB for a PostgreSQL one
    (a PostgreSQL schema becomes a MariaDB database, dropped afterwards)."""
    if request.param == "postgres":
        name = f"{unique_name}_tgt"
        servers.postgres.create_database(name)
        conn = servers.postgres.connect(name)
        yield "postgres", name, conn
        conn.close()
        return
    conn = servers.mariadb.connect()
    yield "mysql", "", conn
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{unique_name}`")
    conn.close()


@pytest.mark.parametrize("source_kind, target", [("mysql", "postgres"), ("postgres", "mysql")],
                         indirect=["target"], ids=["mysql_to_postgres", "postgres_to_mariadb"])
def test_snapshot_on_executors_then_log_phase(tmp_path, servers, cluster_spark, unique_name, source_kind, target):
    target_kind, target_db, target_conn = target
    ns = unique_name
    seed = MYSQL_SEED if source_kind == "mysql" else [s.format(ns=ns) for s in POSTGRES_SEED]
    with source_database(servers, source_kind, unique_name, seed) as source_conn:
        config = config_for(tmp_path, servers, task_id=f"cl_{unique_name}", source=source_kind, source_db=ns,
                            tables=[f"{ns}.events"], target=target_kind, target_db=target_db,
                            snapshot={"split_size": SPLIT})
        rt = TaskRuntime(config)
        rt.adopt_spark(cluster_spark)
        try:
            before = executor_tasks(cluster_spark)
            snapshot_all(rt)
            after = executor_tasks(cluster_spark)
            assert_same_rows(source_conn, source_kind, target_conn, target_kind, ns)

            binary = "UNHEX('00090A')" if source_kind == "mysql" else "'\\x00090a'::bytea"
            run_transactions(source_conn, changes(ns, binary))
            report = sync(rt, until_caught_up=True)
            assert report.events > 0
            assert_same_rows(source_conn, source_kind, target_conn, target_kind, ns)
        finally:
            rt.close()
    # Both executors ran the snapshot's tasks (at least one per split), the driver none.
    ran = {e: after[e] - before.get(e, 0) for e in after if e != "driver"}
    assert len(ran) == 2 and sum(ran.values()) >= ROWS // SPLIT, (before, after)
    assert after.get("driver", 0) == 0, after


def assert_same_rows(source_conn, source_kind: str, target_conn, target_kind: str, ns: str) -> None:
    want = fetch_rows(source_conn, table_sql(source_kind, ns), "id")
    got = fetch_rows(target_conn, table_sql(target_kind, ns), "id")
    assert len(got) == len(want), f"{len(got)} rows in the target, {len(want)} in the source"
    for row_got, row_want in zip(got, want):
        assert row_got == row_want


def table_sql(kind: str, ns: str) -> str:
    return f"`{ns}`.`events`" if kind == "mysql" else f'"{ns}"."events"'
