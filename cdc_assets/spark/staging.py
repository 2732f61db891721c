"""Bulk rows through Spark: read a batch of key ranges over JDBC, write them into a staging table.

A batch of splits is one JDBC relation with one partition per split (Spark's `predicates`), so the
splits read in parallel and the schema is resolved once. For PostgreSQL targets the source renders each
row as one COPY text line and Spark carries a single string column: the JVM then decodes one value per
row instead of one per column, which was most of the CPU a 1M-row snapshot spent (bench/snapshot.py).
MySQL targets take typed columns over JDBC with rewriteBatchedStatements.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import postgres_args


def read_splits(spark: SparkSession, endpoint: JdbcEndpoint, query: str, predicates: list[str],
                fetch_size: int) -> DataFrame:
    """`query` selects every column of the batch; each predicate selects one split's key range from it."""
    props = {**endpoint.properties(), "fetchsize": str(fetch_size)}
    return spark.read.jdbc(endpoint.url, f"({query}) AS batch", predicates=predicates, properties=props)


def write_staging(frame: DataFrame, endpoint: JdbcEndpoint, staging_table: str, batch_size: int) -> None:
    """Typed rows over JDBC batched inserts (MySQL targets)."""
    props = {**endpoint.properties(), "batchsize": str(batch_size), "isolationLevel": "READ_COMMITTED"}
    frame.write.jdbc(endpoint.url, staging_table, mode="append", properties=props)


def copy_lines(frame: DataFrame, url: DbUrl, staging_table: str) -> None:
    """COPY text lines (one string column, rendered by the source) into a PostgreSQL staging table.

    Each partition arrives as Arrow batches in a Python worker, which streams them to `COPY ... FROM STDIN`
    over its own connection, in one transaction per partition (as Spark's JDBC writer does)."""
    connect_args = postgres_args(url)
    copy_sql = f"COPY {staging_table} FROM STDIN"

    def copy_partition(batches):
        import io

        import psycopg2
        import pyarrow as pa

        rows = 0
        conn = psycopg2.connect(**connect_args)
        try:
            with conn, conn.cursor() as cur:
                for batch in batches:
                    lines = batch.column(0).to_pylist()
                    cur.copy_expert(copy_sql, io.BytesIO(("\n".join(lines) + "\n").encode()))
                    rows += len(lines)
        finally:
            conn.close()
        yield pa.RecordBatch.from_pydict({"rows": [rows]})

    frame.select(frame.columns[0]).mapInArrow(copy_partition, "rows long").groupBy().sum("rows").collect()
