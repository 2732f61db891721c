"""A `TaskExport` (a source read by its own client inside Spark tasks, as the MongoDB source reads) runs through
`spark/staging.stage` into a real PostgreSQL staging table (COPY_TEXT lines, COPY) and a real MariaDB one (typed
columns, Spark's JDBC writer), and the sinks' merge makes the rows visible exactly as the tasks yielded them; a
`TaskWrite` (a sink's own client) runs once per partition and its counts add up."""
import datetime as dt
import functools
import json
from decimal import Decimal

from cdc_assets.core.boundary import (SPLIT_COLUMN, RowExport, RowFormat, SplitRanges, TaskExport, TaskWrite,
                                      Transport)
from cdc_assets.core.splits import KeyRange
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import postgres_args
from cdc_assets.sinks.mysql import MysqlSink
from cdc_assets.sinks.postgres import PostgresSink
from cdc_assets.spark.staging import stage
from cdc_assets_tests.support import normalise

UTC = dt.timezone.utc
COLUMNS = (
    Column("id", Kind.INT, "bigint", nullable=False, bits=64),
    Column("name", Kind.STRING, "text"),
    Column("amount", Kind.DECIMAL, "decimal(12,3)", precision=12, scale=3),
    Column("at", Kind.TIMESTAMP, "timestamp(6)", precision=6),
    Column("data", Kind.BINARY, "blob"),
    Column("doc", Kind.JSON, "json"),
)
# Split index -> its rows: text that COPY must escape, NULLs, bytes that are not UTF-8, sub-second instants.
ROWS = {
    0: [(1, "plain", Decimal("12.500"), dt.datetime(2024, 1, 2, 3, 4, 5, 123456, UTC), b"\x00\xff", {"a": 1}),
        (2, "tab\there\nnew line\\back\rslash", Decimal("-0.001"), dt.datetime(1999, 12, 31, 23, 59, 59, 0, UTC),
         b"", {"b": [1, "x"]})],
    1: [(10, "ünïcødé ✓ 😀", Decimal("999999999.999"), dt.datetime(2038, 1, 19, 3, 14, 8, 1, UTC), b"\\N",
         {"nested": {"k": None}})],
    2: [(20, None, None, None, None, None), (21, r"\N", Decimal("0.000"), dt.datetime(1970, 1, 1, 0, 0, 0, 0, UTC),
                                             bytes(range(256)), [])],
}
EXPECTED = sorted((row for rows in ROWS.values() for row in rows), key=lambda row: row[0])


def _copy_field(value) -> str:
    if value is None:
        return r"\N"
    if isinstance(value, bytes):
        return "\\\\x" + value.hex()
    if isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
    elif isinstance(value, (dict, list)):
        text = json.dumps(value, ensure_ascii=False)
    else:
        text = str(value)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def read_copy_lines(task: int):
    """Runs in a Spark task: one split's rows as COPY text lines, the split index first."""
    for row in ROWS[task]:
        yield ("\t".join([str(task)] + [_copy_field(v) for v in row]),)


def read_columns(task: int):
    """Runs in a Spark task: one split's rows as typed columns, the split index first, JSON as text."""
    for row in ROWS[task]:
        yield (task, *row[:-1], None if row[-1] is None else json.dumps(row[-1]))


def _schema(unique_name: str) -> TableSchema:
    return TableSchema(TableId(unique_name, "items"), COLUMNS, ("id",))


def _merge(sink, schema: TableSchema, export: RowExport, spark) -> dict[int, int]:
    sink.ensure_table(schema)
    staging = sink.staging_table(schema.table, 0)
    sink.create_staging(staging, export, schema.primary_key)
    stage(spark, export, sink.staging_write(staging, export), fetch_size=100)
    with sink.transaction() as tx:
        counts = sink.merge_staged(tx, schema, staging, export, SplitRanges("int", (KeyRange(None, None),), True))
    sink.drop_staging(staging)
    return counts


def test_task_export_of_copy_lines_lands_in_postgres(servers, spark, pg_target, unique_name):
    name, conn = pg_target
    schema = _schema(unique_name)
    sink = PostgresSink(DbUrl.parse(servers.postgres.url(name)), "mongodb")
    try:
        assert sink.target_format().rows == RowFormat.COPY_TEXT
        export = RowExport(RowFormat.COPY_TEXT, TaskExport(tuple(ROWS), read_copy_lines, "line string"),
                           tuple(Transport(c, as_text=False) for c in COLUMNS))
        counts = _merge(sink, schema, export, spark)
    finally:
        sink.close()
    assert counts == {i: len(rows) for i, rows in ROWS.items()}
    with conn.cursor() as cur:
        cur.execute(f'SELECT id, name, amount, "at", data, doc FROM "{unique_name}".items ORDER BY id')
        got = [tuple(normalise(v) for v in row[:-1]) + (row[-1],) for row in cur.fetchall()]
    want = [row[:3] + (None if row[3] is None else row[3].replace(tzinfo=None),) + row[4:] for row in EXPECTED]
    assert got == want


def test_task_export_of_typed_columns_lands_in_mariadb(servers, spark, unique_name):
    schema = _schema(unique_name)
    sink = MysqlSink(DbUrl.parse(servers.mariadb.url()), "mongodb", write_batch_size=2)
    try:
        assert sink.target_format().rows == RowFormat.COLUMNS
        spark_schema = (f"{SPLIT_COLUMN} int, id bigint, name string, amount decimal(12,3), at timestamp, "
                        "data binary, doc string")
        transports = tuple(Transport(c, as_text=c.kind == Kind.JSON) for c in COLUMNS)
        export = RowExport(RowFormat.COLUMNS, TaskExport(tuple(ROWS), read_columns, spark_schema), transports)
        counts = _merge(sink, schema, export, spark)
        conn = servers.mariadb.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT id, name, amount, `at`, data, doc FROM `{unique_name}`.items ORDER BY id")
                rows = cur.fetchall()
            with conn.cursor() as cur:
                cur.execute(f"DROP DATABASE `{unique_name}`")
        finally:
            conn.close()
    finally:
        sink.close()
    assert counts == {i: len(rows) for i, rows in ROWS.items()}
    got = [tuple(normalise(v) for v in row[:-1]) + (None if row[-1] is None else json.loads(row[-1]),) for row in rows]
    want = [row[:3] + (None if row[3] is None else row[3].replace(tzinfo=None),) + row[4:] for row in EXPECTED]
    assert got == want


def write_rows(connect_args: dict, table: str, rows) -> int:
    """Runs in a Spark task: one partition's rows inserted by a client of the sink's own (a `TaskWrite`)."""
    import psycopg2

    rows = [tuple(row) for row in rows]
    conn = psycopg2.connect(**connect_args)
    try:
        with conn, conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s)", rows)
    finally:
        conn.close()
    return len(rows)


def read_names(task: int):
    for row in ROWS[task]:
        yield task, row[0], row[1]


def test_task_write_runs_in_each_partition_and_counts_the_rows(servers, spark, pg_target):
    name, conn = pg_target
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE written (split int, id bigint, name text)")
    export = RowExport(RowFormat.COLUMNS, TaskExport(tuple(ROWS), read_names, "split int, id bigint, name string"),
                       tuple(Transport(c, False) for c in COLUMNS[:2]))
    write = TaskWrite(functools.partial(write_rows, postgres_args(DbUrl.parse(servers.postgres.url(name))), "written"))
    assert sum(stage(spark, export, write, fetch_size=100)) == len(EXPECTED)
    with conn.cursor() as cur:
        cur.execute("SELECT split, id, name FROM written ORDER BY id")
        assert cur.fetchall() == [(i, row[0], row[1]) for i, rows in ROWS.items() for row in rows]
