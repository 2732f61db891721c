"""A fresh Spark session's first-job costs (class loading, codegen, Python worker start), paid at start-up instead
of by the first split's read; where the snapshot reads through Spark JDBC, also the first login of that connection,
so that a refused one is told before any split is read."""
from __future__ import annotations

from pyspark.sql import SparkSession

from cdc_assets.core.boundary import SnapshotSource
from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.spark.errors import jdbc_connect_failure
from cdc_assets.spark.parallelism import parallelism
from cdc_assets.spark.staging import per_task


def warm_up(session: SparkSession, endpoint: JdbcEndpoint) -> None:
    """Pay Spark's first-job costs at start-up.

    The first large batch of a fresh session takes seconds longer than the next; a one-row
    JDBC read through a Python worker first moves that cost out of the first split's read. It is also the first
    login of the Spark JDBC connection: a refusal is told as such (LoginError), naming that connection."""
    try:
        frame = session.read.jdbc(endpoint.url, "(SELECT 1 AS warm_up) AS w", properties=endpoint.properties())
        frame.mapInArrow(lambda batches: batches, frame.schema).collect()
    except Exception as exc:  # Py4J's error around the driver's
        if (failure := jdbc_connect_failure(exc, endpoint)) is not None:
            raise failure from None
        raise


def warm_up_source(session: SparkSession, source: SnapshotSource, jdbc: bool = True) -> None:
    """`warm_up` for whatever source the task reads: one that Spark reads over JDBC declares its endpoint
    (`jdbc_endpoint()`), whose login is checked here; any other, or one whose snapshot does not read through Spark
    JDBC (`jdbc` False: piped `COPY`), pays the Python workers' start only."""
    endpoint = source.jdbc_endpoint() if jdbc else None
    if endpoint is not None:
        warm_up(session, endpoint)
        return
    # The piped export's own job (spark/staging.per_task, one task per task slot), whose tasks import what a pipe
    # task imports: its first group then runs as fast as the next.
    def import_pipe(_: int) -> int:  # nested: pickled by value, so the workers need not import this module
        try:
            import psycopg2  # noqa: F401
        except ImportError:  # an executor without it reads through JDBC (snapshot.pipe: false)
            pass
        return 0

    per_task(session, parallelism(session), import_pipe)
