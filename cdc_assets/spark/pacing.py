"""`snapshot.read_limit` inside Spark: every task of a group of splits paces its own rows with a token bucket
(core/read_limit.py) at `limit / k`, k the number of tasks that run at once (min(partitions, the session's parallelism: spark/parallelism.py)).

Why a share per task and not one shared bucket: tasks run in Python workers of their own (executors, in a
cluster) that share no memory, and a bucket behind a network call would cost a round trip per batch. Splits are
planned to about the same number of rows, so the tasks of a wave run about equally long and together reach about
the limit; when one ends early its share goes unused, so the aggregate stays at or under the limit, never over.
Only `TaskShare` and core/read_limit.py travel into the tasks: a Python worker imports nothing else for them.
Each task waits for its share after each batch it passed on, so the source read (which Spark pulls through the
pacing step, a socket buffer ahead) and the staging write follow its pace.

Where rows are counted, and what a byte is:
- COPY_TEXT rows into PostgreSQL (`CopyWrite`): in the COPY task; bytes = the COPY lines' UTF-8 length.
- JDBC writes (MySQL targets): a pass-through `mapInArrow` before the writer, added only when a limit is set;
  bytes = the Arrow batch's `nbytes` (its buffers: values, offsets, validity bitmaps).
- The sink's own client (`TaskWrite`, MongoDB targets): around its row iterator (core/read_limit.paced_rows);
  bytes = `value_bytes` of each row tuple (str/bytes lengths, 8 for any other value).
"""
from __future__ import annotations

from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession

from cdc_assets.config import ReadLimit
from cdc_assets.core.read_limit import TaskShare, share
from cdc_assets.spark.parallelism import parallelism
from cdc_assets.spark.session import is_shared

ARROW_BATCH_ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"


def task_share(spark: SparkSession, limit: ReadLimit | None, partitions: int) -> TaskShare | None:
    """Each task's share of `limit` when a job of `partitions` partitions runs; None without a limit."""
    if limit is None or (limit.rows_per_second is None and limit.bytes_per_second is None):
        return None
    k = max(1, min(partitions, parallelism(spark)))
    return TaskShare(share(limit.rows_per_second, k), share(limit.bytes_per_second, k))


@contextmanager
def arrow_batches(spark: SparkSession, limit: TaskShare | None):
    """Arrow batches of `limit.batch_rows` rows for the jobs run in the block (the session's setting is put back
    after); nothing changes without a limit, nor in a Spark Connect session the task's other runs share (a setting
    there is theirs too: each task then paces per batch of the server's size, the same rate, in coarser steps)."""
    if limit is None or is_shared(spark):
        yield
        return
    before = spark.conf.get(ARROW_BATCH_ROWS, None)
    spark.conf.set(ARROW_BATCH_ROWS, str(limit.batch_rows))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(ARROW_BATCH_ROWS)
        else:
            spark.conf.set(ARROW_BATCH_ROWS, before)


def paced_frame(frame: DataFrame, limit: TaskShare | None) -> DataFrame:
    """The frame itself without a limit; with one, the same rows through a pass-through `mapInArrow` that paces
    each task's batches (rows, Arrow `nbytes`)."""
    if limit is None:
        return frame

    def pace(batches):
        pacer = limit.pacer()
        for batch in batches:
            pacer.pace(batch.num_rows, batch.nbytes)
            yield batch

    return frame.mapInArrow(pace, frame.schema)
