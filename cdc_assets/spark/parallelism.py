"""How many tasks a session runs at once: the width of a snapshot's group of splits and the divisor of each task's
share of `snapshot.read_limit`.

A classic session asks its SparkContext (`defaultParallelism`). A Spark Connect session has none: the server's
`spark.default.parallelism` when it sets one (the dev server does), else one tiny job asks the server how many
partitions a range gets by default (that is the server's defaultParallelism), once per session.
"""
from __future__ import annotations

import weakref

from pyspark.sql import SparkSession

_REMOTE_WIDTH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def is_remote(spark: SparkSession) -> bool:
    """A Spark Connect session: no SparkContext, no RDDs."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def parallelism(spark: SparkSession) -> int:
    if not is_remote(spark):
        return max(1, spark.sparkContext.defaultParallelism)
    if (width := _REMOTE_WIDTH.get(spark)) is None:
        width = _REMOTE_WIDTH[spark] = _remote_parallelism(spark)
    return width


def _remote_parallelism(spark: SparkSession) -> int:
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return max(1, int(configured))
    # The Connect module's function: pyspark.sql.functions builds classic columns unless the whole process was
    # switched to Connect mode (SPARK_CONNECT_MODE_ENABLED, which would also turn later local sessions remote).
    from pyspark.sql.connect.functions import spark_partition_id

    # A range of more rows than any server has cores leaves no partition empty.
    return max(1, spark.range(4096).select(spark_partition_id().alias("p")).distinct().count())
