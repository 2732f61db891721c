"""The local session's Python workers and its stop."""
import threading
from pathlib import Path

import pyspark
import pytest
from pyspark import SparkContext
from pyspark.find_spark_home import _find_spark_home

from cdc_assets.spark.session import stop_session


def test_local_workers_import_the_installed_pyspark_not_spark_homes_zip(spark):
    """The zip holds no bytecode: imported from it, PySpark was compiled anew by every daemon and worker."""
    installed = Path(pyspark.__file__).resolve().parent
    if Path(_find_spark_home()).resolve() != installed:
        pytest.skip("SPARK_HOME is a Spark distribution, not the installed PySpark: its zip is what workers import")

    def where(batches):
        import pyspark as worker_pyspark
        import pyspark.worker

        for batch in batches:
            yield batch.from_pydict({"id": batch.column(0), "module": [worker_pyspark.__file__] * batch.num_rows,
                                     "worker": [pyspark.worker.__file__] * batch.num_rows})

    rows = spark.range(0, 2, 1, 2).mapInArrow(where, "id long, module string, worker string").collect()
    assert len(rows) == 2
    for row in rows:
        assert Path(row.module).resolve().parent == installed and Path(row.worker).resolve().parent == installed


def test_stop_leaves_the_accumulator_server_to_a_thread_of_its_own(spark):
    """`SparkContext.stop` waited for the server's handler to notice, up to a second of nothing per stop."""
    context = SparkContext._active_spark_context
    server = context._accumulatorServer
    stopped_on = []
    shutdown = server.shutdown

    def recorded_shutdown():
        stopped_on.append(threading.current_thread())
        shutdown()

    server.shutdown = recorded_shutdown
    stop_session(spark)  # the `spark` fixture starts another session for the next test
    assert SparkContext._active_spark_context is None and context._jsc is None
    for thread in threading.enumerate():
        if thread.name == "cdc-spark-accumulators-stop":
            thread.join(timeout=10)
    assert stopped_on and stopped_on[0] is not threading.current_thread()
    assert server.socket.fileno() == -1  # closed: the server ended
