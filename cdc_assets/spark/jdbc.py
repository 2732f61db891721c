"""Bulk rows through Spark: read key ranges over JDBC, write them into a staging table.

Each split becomes one single-partition JDBC relation tagged with its split index, and the union of them
one Spark job, so a batch of splits reads in parallel and the sink can count rows per split.
"""
from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame, SparkSession

from cdc_assets.core.jdbc import JdbcEndpoint


def read_splits(spark: SparkSession, endpoint: JdbcEndpoint, queries: dict[int, str], fetch_size: int) -> DataFrame:
    """`queries` maps split index -> `SELECT <index> AS _cdc_split, ... FROM t WHERE <range>`."""
    props = {**endpoint.properties(), "fetchsize": str(fetch_size)}
    frames = [
        spark.read.jdbc(endpoint.url, f"({sql}) AS split_{index}", properties=props)
        for index, sql in sorted(queries.items())
    ]
    return reduce(DataFrame.unionByName, frames)


def write_staging(frame: DataFrame, endpoint: JdbcEndpoint, staging_table: str, batch_size: int) -> None:
    props = {**endpoint.properties(), "batchsize": str(batch_size), "isolationLevel": "READ_COMMITTED"}
    frame.write.jdbc(endpoint.url, staging_table, mode="append", properties=props)
