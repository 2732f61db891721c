"""Bulk rows through Spark: read a batch of key ranges over JDBC, write them into a staging table.

A batch of splits is one JDBC relation with one partition per split (Spark's `predicates`), so the
splits read in parallel and the schema is resolved once. Into PostgreSQL each partition streams as
Arrow batches to a Python worker that `COPY`s them as CSV: a quarter faster than JDBC batched inserts
on 1M rows (bench/snapshot.py); MySQL targets take JDBC with rewriteBatchedStatements.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.urls import DbUrl


def read_splits(spark: SparkSession, endpoint: JdbcEndpoint, query: str, predicates: list[str],
                fetch_size: int) -> DataFrame:
    """`query` selects every column of the batch; each predicate selects one split's key range from it."""
    props = {**endpoint.properties(), "fetchsize": str(fetch_size)}
    return spark.read.jdbc(endpoint.url, f"({query}) AS batch", predicates=predicates, properties=props)


def write_staging(frame: DataFrame, url: DbUrl, endpoint: JdbcEndpoint, staging_table: str, batch_size: int) -> None:
    if url.db_type == "postgres":
        _copy_into_postgres(frame, url, staging_table)
        return
    props = {**endpoint.properties(), "batchsize": str(batch_size), "isolationLevel": "READ_COMMITTED"}
    frame.write.jdbc(endpoint.url, staging_table, mode="append", properties=props)


def _copy_into_postgres(frame: DataFrame, url: DbUrl, staging_table: str) -> None:
    connect_args = dict(host=url.host, port=url.port, user=url.user or None, password=url.password or None,
                        dbname=url.database or "postgres", options="-c TimeZone=UTC")
    columns = ", ".join('"' + c.replace('"', '""') + '"' for c in frame.columns)
    copy_sql = f"COPY {staging_table} ({columns}) FROM STDIN WITH (FORMAT csv)"

    def copy_partition(batches):
        import io

        import psycopg2
        import pyarrow as pa
        import pyarrow.csv as csv

        rows = 0
        conn = psycopg2.connect(**connect_args)
        try:
            with conn, conn.cursor() as cur:  # one transaction per partition, like Spark's JDBC writer
                for batch in batches:
                    buf = io.BytesIO()
                    csv.write_csv(_csv_ready(batch), buf, write_options=csv.WriteOptions(include_header=False))
                    buf.seek(0)
                    cur.copy_expert(copy_sql, buf)
                    rows += batch.num_rows
        finally:
            conn.close()
        yield pa.RecordBatch.from_pydict({"rows": [rows]})

    frame.mapInArrow(copy_partition, "rows long").groupBy().sum("rows").collect()


def _csv_ready(batch):
    """Arrow's CSV writer has no binary type: bytea goes as PostgreSQL hex text (`\\x00ff`)."""
    import pyarrow as pa

    arrays = []
    for array in batch.columns:
        if pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type):
            array = pa.array([None if v is None else "\\x" + v.hex() for v in array.to_pylist()], pa.string())
        arrays.append(array)
    return pa.Table.from_arrays(arrays, names=batch.schema.names)
