"""Bulk rows through Spark: a source's `RowExport` of a group of splits into a sink's staging write.

A group is one Spark job with one partition per split: a JDBC relation with one predicate per split (the
schema is resolved once), or one task per split running the source's own client. COPY_TEXT rows (PostgreSQL
targets) are one string column, the row as a COPY line: the JVM then decodes one value per row instead of one
per column, which was most of the CPU a 1M-row snapshot spent (bench/snapshot.py), and each partition's Arrow
batches stream into `COPY ... FROM STDIN`. COLUMNS rows go through Spark's JDBC writer (rewriteBatchedStatements),
or the sink's own client in each task. With `snapshot.read_limit`, each task paces its rows (spark/pacing.py).
A PostgreSQL or MySQL source into a PostgreSQL target (`CopyOutExport`) skips the JVM for rows: one task per split
pipes the source's COPY text into the staging COPY (spark/copy_pipe.py).
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from cdc_assets.config import ReadLimit
from cdc_assets.core.boundary import (CopyOutExport, CopyWrite, JdbcExport, JdbcWrite, RowExport, TaskExport,
                                     TaskWrite)
from cdc_assets.core.read_limit import TaskShare, paced_rows
from cdc_assets.spark.copy_pipe import LINE_TOO_LONG
from cdc_assets.spark.pacing import arrow_batches, paced_frame, task_share
from cdc_assets.spark.parallelism import is_remote

TASK_BATCH_ROWS = 10_000  # a TaskExport's tuples per Arrow batch


def stage(spark: SparkSession, export: RowExport, write: JdbcWrite | CopyWrite | TaskWrite,
          fetch_size: int, limit: ReadLimit | None = None) -> list[int] | None:
    """Read the group's rows as `export` says and write them as `write` says; `fetch_size`: rows per JDBC fetch;
    `limit`: the rows and bytes a second of all the group's tasks together (spark/pacing.py).
    The rows written by each partition (one per split, in the group's order) where the write counts them (COPY,
    the sink's own client); None through JDBC."""
    each = task_share(spark, limit, _partitions(export))
    if isinstance(export.how, CopyOutExport):
        if not isinstance(write, CopyWrite):
            raise TypeError(f"a COPY TO export goes into a COPY staging write, not {type(write).__name__}")
        return pipe_copy(spark, export.how, write, each)
    frame = read_export(spark, export, fetch_size)
    with arrow_batches(spark, each):
        return _write(frame, write, each)


def stage_each(spark: SparkSession, pairs: list[tuple[RowExport, JdbcWrite | CopyWrite | TaskWrite]],
               fetch_size: int, limit: ReadLimit | None = None) -> tuple[list[Exception | None], list[int] | None]:
    """Each (export, write) of several targets; exports that share a `how` are one read of the source, cached
    across their writes (paced by `limit` during the first, which fills the cache), each write taking its export's
    columns. Each write's error is returned in its place and the others go on; one pair raises, as `stage` does.
    With one pair, also `stage`'s rows per partition."""
    if len(pairs) == 1:
        return [None], stage(spark, *pairs[0], fetch_size, limit)
    from pyspark import StorageLevel

    reads: dict[int, list[int]] = {}
    for n, (export, _) in enumerate(pairs):
        reads.setdefault(id(export.how), []).append(n)
    errors: list[Exception | None] = [None] * len(pairs)
    for members in reads.values():
        first = pairs[members[0]][0]
        try:
            frame = read_export(spark, first, fetch_size).persist(StorageLevel.MEMORY_AND_DISK)
        except Exception as exc:  # the read itself: every write of it fails
            for n in members:
                errors[n] = exc
            continue
        each = task_share(spark, limit, _partitions(first))
        try:
            with arrow_batches(spark, each):
                for n in members:
                    export, write = pairs[n]
                    try:
                        _write(_columns(frame, export), write, each)
                    except Exception as exc:
                        errors[n] = exc
        finally:
            frame.unpersist()
    return errors, None


def _columns(frame: DataFrame, export: RowExport) -> DataFrame:
    if not export.columns:
        return frame
    return frame.select(*[frame["`" + name.replace("`", "``") + "`"] for name in export.columns])


def _write(frame: DataFrame, write: JdbcWrite | CopyWrite | TaskWrite, each: TaskShare | None) -> list[int] | None:
    if isinstance(write, JdbcWrite):
        write_jdbc(paced_frame(frame, each), write)
        return None
    if isinstance(write, CopyWrite):
        return write_copy(frame, write, each)
    return write_tasks(frame, write, each)


def _partitions(export: RowExport) -> int:
    how = export.how
    if isinstance(how, JdbcExport):
        return len(how.predicates)
    return len(how.statements) if isinstance(how, CopyOutExport) else len(how.tasks)


def read_export(spark: SparkSession, export: RowExport, fetch_size: int) -> DataFrame:
    how = export.how
    if isinstance(how, JdbcExport):
        # The query selects every column of the group; each predicate selects one split's key range from it.
        props = {**how.endpoint.properties(), "fetchsize": str(fetch_size)}
        return spark.read.jdbc(how.endpoint.url, f"({how.query}) AS batch", predicates=list(how.predicates),
                               properties=props)
    if isinstance(how, TaskExport):
        return read_tasks(spark, how)
    raise TypeError(f"unknown export {type(how).__name__}")


def read_tasks(spark: SparkSession, how: TaskExport) -> DataFrame:
    """Each task of `how` in a partition of its own (as a JDBC predicate would be): a frame of task indexes, one
    per partition, through a `mapInArrow` that runs `how.read` and hands its tuples on as Arrow batches. DataFrame
    operations only, so a Spark Connect session (no SparkContext, no RDDs) runs it as a local one does."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = spark.createDataFrame([], how.schema).schema
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    tasks, read = how.tasks, how.read

    def read_partition(batches):
        import pyarrow as pa

        def batch(rows):
            columns = zip(*rows) if rows else [[] for _ in arrow_schema]
            return pa.RecordBatch.from_arrays([pa.array(list(values), type=f.type)
                                               for values, f in zip(columns, arrow_schema)], schema=arrow_schema)

        for indexes in batches:
            for index in indexes.column(0).to_pylist():
                rows = []
                for row in read(tasks[index]):
                    rows.append(row)
                    if len(rows) >= TASK_BATCH_ROWS:
                        yield batch(rows)
                        rows = []
                if rows:
                    yield batch(rows)

    count = max(len(tasks), 1)
    return spark.range(0, len(tasks), 1, count).mapInArrow(read_partition, schema)


def pipe_copy(spark: SparkSession, export: CopyOutExport, write: CopyWrite,
              limit: TaskShare | None = None) -> list[int]:
    """Each split's COPY text on the source piped into the staging COPY, one Spark task per split, one target
    transaction per split; with a `limit`, each task paced per chunk. The rows written per split, in the group's
    order."""
    source_args, statements, client = export.connect_args, export.statements, export.client
    target_args, copy_sql = write.connect_args, write.copy_sql + (" (FORMAT binary)" if export.binary else "")
    chunk_rows = limit.batch_rows if limit is not None else None

    def pipe(n: int) -> int:
        from cdc_assets.spark.copy_pipe import pipe_split

        return pipe_split(source_args, statements[n], target_args, copy_sql,
                          limit.pacer() if limit is not None else None, chunk_rows, client)

    return per_task(spark, len(statements), pipe)


def per_task(spark: SparkSession, n: int, task) -> list[int]:
    """`task(i)` for i in range(n), one Spark task each (partition i runs i), its results in that order.

    A classic session runs an RDD job: no rows pass through it, so Spark SQL's planner and code generator have
    nothing to do, and a session that runs no other query never pays their start (a fresh driver's first SQL job loads classes and
    compiles whole-stage code; docs/architecture/spark-driver.md). Spark Connect has no RDDs: there, a range of n partitions through mapInArrow."""
    if not is_remote(spark):
        return spark.sparkContext.parallelize(range(n), n).map(task).collect()

    def each(batches):
        import pyarrow as pa

        for batch in batches:
            for i in batch.column(0).to_pylist():
                yield pa.RecordBatch.from_pydict({"rows": [task(i)]}, schema=pa.schema([("rows", pa.int64())]))

    return _counts(spark.range(0, n, 1, n), each)


def write_jdbc(frame: DataFrame, write: JdbcWrite) -> None:
    """Typed rows over JDBC batched inserts."""
    props = {**write.endpoint.properties(), "batchsize": str(write.batch_size), "isolationLevel": "READ_COMMITTED"}
    frame.write.jdbc(write.endpoint.url, write.table, mode="append", properties=props)


def write_copy(frame: DataFrame, write: CopyWrite, limit: TaskShare | None = None) -> list[int]:
    """COPY text lines (the frame's first column) into a PostgreSQL staging table.

    Each partition arrives as Arrow batches in a Python worker, which streams them into one `COPY ... FROM STDIN`
    over its own connection, in one transaction per partition (as Spark's JDBC writer does); with a `limit`,
    paced after each batch by its rows and the byte length of its COPY lines. No Python object per row: each
    batch's lines get their newline in one Arrow kernel, and the string column's data buffer is the COPY payload
    as it is. The rows of each partition, in partition order (a JDBC export's partition i is split i)."""
    connect_args, copy_sql = write.connect_args, write.copy_sql

    def copy_partition(batches):
        import psycopg2
        import pyarrow as pa

        stream = _CopyStream(batches, limit.pacer() if limit is not None else None)
        conn = psycopg2.connect(**connect_args)
        try:
            with conn, conn.cursor() as cur:
                cur.copy_expert(copy_sql, stream)
        finally:
            conn.close()
        yield pa.RecordBatch.from_pydict({"rows": [stream.rows]})

    return _counts(frame.select(frame.columns[0]), copy_partition)


class _CopyStream:
    """The file `copy_expert` reads: each read the COPY text of the next Arrow batch of lines, as one bytes object
    cut from the batch's own buffers."""

    def __init__(self, batches, pacer) -> None:
        self.batches, self.pacer, self.rows = iter(batches), pacer, 0

    def read(self, size: int = -1) -> bytes:
        for batch in self.batches:
            if batch.num_rows:
                data = copy_payload(batch.column(0))
                self.rows += batch.num_rows
                if self.pacer is not None:
                    self.pacer.pace(batch.num_rows, len(data))
                return data
        return b""


def copy_payload(lines) -> bytes:
    """An Arrow string (or binary) array of COPY lines as COPY text: each line and a newline, in one buffer."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if lines.null_count:  # NULL values are \\N: only a line too long for a MariaDB source comes back NULL
        raise ValueError(LINE_TOO_LONG)
    empty, newline = (pa.scalar(v, lines.type) for v in ("", "\n"))
    ended = pc.binary_join_element_wise(lines, empty, newline)  # line + "\n" + ""
    wide = pa.types.is_large_string(ended.type) or pa.types.is_large_binary(ended.type)
    offsets = memoryview(ended.buffers()[1]).cast("q" if wide else "i")
    return memoryview(ended.buffers()[2])[offsets[ended.offset]:offsets[ended.offset + len(ended)]].tobytes()


def write_tasks(frame: DataFrame, write: TaskWrite, limit: TaskShare | None = None) -> list[int]:
    """Each partition's rows (tuples in the export's shape) through the sink's own client; the rows each partition
    wrote, in partition order."""
    fn = write.write

    def write_partition(batches):
        import pyarrow as pa

        def rows():
            for batch in batches:
                yield from zip(*(column.to_pylist() for column in batch.columns))

        yield pa.RecordBatch.from_pydict({"rows": [fn(paced_rows(rows(), limit))]})

    return _counts(frame, write_partition)


def _counts(frame: DataFrame, count_partition) -> list[int]:
    """`count_partition(batches)` runs on each partition and yields one batch holding one `rows` value: those
    values in partition order, which collect() keeps (a groupBy would add a shuffle stage to every group's job)."""
    return [int(r[0]) for r in frame.mapInArrow(count_partition, "rows long").collect()]
