"""A PostgreSQL source's export for a PostgreSQL target is one `COPY ... TO` per split (CopyOutExport), piped by a
Spark task into the staging COPY: its COPY text is byte for byte the lines the JDBC export renders for the same
splits, on values COPY must escape or PostgreSQL renders in session-dependent ways, and the staged rows are the
source's."""
from cdc_assets.core.boundary import CopyOutExport, CopyWrite, JdbcExport, RowFormat, TargetFormat
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import postgres_args
from cdc_assets.sources.base import SqlSource
from cdc_assets.sources.postgres.source import PostgresSource
from cdc_assets.spark.staging import read_export, stage
from cdc_assets_tests.support import source_database

COLUMNS = """id int PRIMARY KEY, t text, b bytea, ts timestamp(6), tz timestamptz, d date, n numeric(30,10), f float8,
r real, i interval, ia int[], ta text[], j json, jb jsonb, u uuid, ok boolean, tm time, bits bit varying(8),
ip inet, m money"""
ROWS = [
    "(1, E'tab\\there\\nnew\\rline\\\\back', '\\x00ff5c4e'::bytea, '2024-01-02 03:04:05.123456', "
    "'2024-01-02 03:04:05.5+05:30', '2024-02-29', 12345678901234567890.0123456789, 'NaN', 'Infinity', "
    "'1 year 2 mons 3 days 04:05:06.7', '{1,NULL,3}', ARRAY['a\"b', 'c\\\\d', E'e\\tf', NULL, ''], "
    "E'{\"k\": \"v\\\\n\", \"x\": [1.50, 2e3]}', '{\"b\": 1, \"a\": [true, null]}', "
    "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true, '23:59:59.999999', B'101', '::1', 12.34)",
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL)",
    "(3, E'\\\\N', '\\x'::bytea, 'infinity', '-infinity', 'infinity', 'NaN', '-Infinity', '-0', '-1 days', '{}', "
    "'{}', 'null', '[]', '00000000-0000-0000-0000-000000000000', false, '00:00', B'', '10.0.0.0/8', -0.01)",
    "(4, E'bs\\bvt\\x0bff\\x0cbell\\x07 ünïcødé ✓ 😀 \\x01', '\\x5c5c78'::bytea, '0001-01-01 00:00:00', "
    "'1970-01-01 00:00:00.000001+00', '4713-01-01 BC', -0.0000000001, 0.1, 3.4028235e38, '0', "
    "'{{1,2},{3,4}}', ARRAY['NULL', '{x}', ' sp '], '\"\\\\u0000\"', '\"\\\\u00e9\"', NULL, NULL, NULL, NULL, NULL, NULL)",
    "(5, '', '\\x0a090d'::bytea, '2000-01-01 00:00:00.000001', '2000-06-01 12:00:00+02', NULL, 0, 1e-300, "
    "1.17549435e-38, '-3 mons +2 days -00:00:01', NULL, NULL, '  {\"spaced\" :  1 }  ', '{}', NULL, NULL, NULL, "
    "NULL, NULL, NULL)",
]


def _source(servers, name: str):
    statements = [f"CREATE TABLE tricky ({COLUMNS})", f"INSERT INTO tricky VALUES {', '.join(ROWS)}"]
    return source_database(servers, "postgres", name, statements)


def _plan(source: PostgresSource):
    schema = source.describe(TableId("public", "tricky"))
    plan = source.plan(schema, 2)
    return schema, plan, list(plan.splits)


def _export(servers, name: str):
    """Every split of `tricky`, exported for a PostgreSQL target that declares each column as the source does."""
    source = PostgresSource(DbUrl.parse(servers.postgres.url(name)))
    try:
        schema, plan, splits = _plan(source)
        target = TargetFormat("postgres", RowFormat.COPY_TEXT, lambda c, in_key: c.native)
        return splits, source.export(plan, schema, splits, target)
    finally:
        source.close()


def _copy_out(export: CopyOutExport) -> list[bytes]:
    import io

    import psycopg2

    lines = []
    conn = psycopg2.connect(**export.connect_args)
    try:
        for statement in export.statements:
            out = io.BytesIO()
            with conn.cursor() as cur:
                cur.copy_expert(statement, out)
            lines += out.getvalue().splitlines()
    finally:
        conn.close()
    return lines


def test_copy_out_text_is_the_jdbc_lines_byte_for_byte(servers, spark, unique_name):
    with _source(servers, unique_name):
        source = PostgresSource(DbUrl.parse(servers.postgres.url(unique_name)))
        try:
            schema, plan, splits = _plan(source)
            assert len(splits) >= 2
            target = TargetFormat("postgres", RowFormat.COPY_TEXT, lambda c, in_key: c.native)
            export = source.export(plan, schema, splits, target)
            jdbc = SqlSource.export(source, plan, schema, splits, target)
        finally:
            source.close()
        assert isinstance(export.how, CopyOutExport) and isinstance(jdbc.how, JdbcExport)
        assert len(export.how.statements) == len(splits)
        piped = _copy_out(export.how)
        lines = [r["line"].encode() for r in read_export(spark, jdbc, 100).select("line").collect()]
    assert len(piped) == len(ROWS)
    assert sorted(piped) == sorted(lines)


def test_copy_out_export_pipes_every_split_into_the_staging_table(servers, spark, pg_target, unique_name):
    name, conn = pg_target
    with _source(servers, unique_name) as src:
        splits, export = _export(servers, unique_name)
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE staged (_cdc_split int, {COLUMNS.replace(' PRIMARY KEY', '')})")
        write = CopyWrite(postgres_args(DbUrl.parse(servers.postgres.url(name))), "COPY staged FROM STDIN")
        queries = spark._jsparkSession.sharedState().statusStore()
        before = queries.executionsCount()
        assert sum(stage(spark, export, write, 100)) == len(ROWS)
        # An RDD job: a driver whose only jobs are pipes never pays Spark SQL's first-query start (1.2 s on 2 cores).
        assert queries.executionsCount() == before
        with src.cursor() as cur:
            cur.execute("SELECT tricky::text FROM tricky ORDER BY id")
            want = cur.fetchall()
    with conn.cursor() as cur:
        cur.execute("SELECT count(DISTINCT _cdc_split) FROM staged")
        assert cur.fetchone()[0] == len(splits)
        cur.execute("ALTER TABLE staged DROP COLUMN _cdc_split")
        cur.execute("SET TimeZone = UTC")
        cur.execute("SELECT staged::text FROM staged ORDER BY id")
        got = cur.fetchall()
    assert got == want


def test_a_failed_side_of_the_pipe_raises_the_database_message(servers, pg_target, unique_name):
    import traceback

    import psycopg2
    import pytest

    from cdc_assets.spark.copy_pipe import CopyOutFailed, pipe_split
    from cdc_assets.spark.errors import root_cause

    name, conn = pg_target
    with _source(servers, unique_name):
        source_args = postgres_args(DbUrl.parse(servers.postgres.url(unique_name)))
        target_args = postgres_args(DbUrl.parse(servers.postgres.url(name)))
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE narrow (id int)")
        with pytest.raises(psycopg2.Error, match="extra data after last expected column"):
            pipe_split(source_args, "COPY (SELECT id, t FROM tricky) TO STDOUT", target_args, "COPY narrow FROM STDIN")
        with pytest.raises(CopyOutFailed, match="UndefinedColumn: column \"missing\" does not exist") as failed:
            pipe_split(source_args, "COPY (SELECT missing FROM tricky) TO STDOUT", target_args,
                       "COPY narrow FROM STDIN")
        in_spark = Exception("".join(traceback.format_exception(failed.value)))  # what a PythonException says
        assert root_cause(in_spark) == ('column "missing" does not exist',
                                            "in a Spark Python worker reading the source (COPY TO)")
        assert pipe_split(source_args, "COPY (SELECT id FROM tricky) TO STDOUT", target_args,
                          "COPY narrow FROM STDIN") == len(ROWS)


# Every type the binary pipe takes (sources/postgres/source._BINARY_SAFE), a domain over one of them, and values
# at their edges: what the binary format must carry exactly as the text one does.
BINARY_COLUMNS = """id int PRIMARY KEY, s smallint, big bigint, r real, f float8, n numeric(30,10), nn numeric,
t text, v varchar(12), c char(4), ok boolean, d date, tm time(3), ttz timetz, ts timestamp(6), tz timestamptz,
i interval, b bytea, u uuid, j json, jb jsonb, dom positive_int"""
BINARY_ROWS = [
    "(1, -32768, -9223372036854775808, 'NaN', '-Infinity', 12345678901234567890.0123456789, 'NaN', "
    "E'tab\\there\\nnew\\\\ ünïcødé 😀', 'exactly12chr', 'ab', true, '4713-01-01 BC', '23:59:59.999', "
    "'12:00:00+05:30', '0001-01-01 00:00:00.000001', '2024-01-02 03:04:05.5+05:30', "
    "'-3 mons +2 days -00:00:01.5', '\\x00ff0a5c4e'::bytea, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
    "E'{\"k\": \"v\\\\n\",  \"x\": [1.50, 2e3]}', '{\"b\": 1, \"a\": [true, null]}', 7)",
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL)",
    "(3, 32767, 9223372036854775807, 3.4028235e38, 1e-300, -0.0000000001, 'Infinity', '', '', '', false, "
    "'infinity', '00:00', '00:00:00-15:59', 'infinity', '-infinity', '0', '\\x'::bytea, "
    "'00000000-0000-0000-0000-000000000000', 'null', '\"\\\\u00e9\"', 1)",
    "(4, 0, 0, '-0', '-0', 'NaN', '-Infinity', E'\\\\N', 'NULL', 'x   ', NULL, '2000-02-29', '12:34:56.789', "
    "NULL, '2000-01-01 00:00:00', '1970-01-01 00:00:00.000001+00', '178000000 years', '\\x5c5c78'::bytea, NULL, "
    "'  {\"spaced\" :  1 }  ', '[]', NULL)",
]


def test_binary_pipe_stages_the_source_values_exactly(servers, spark, pg_target, unique_name):
    """Where every column keeps the source's own built-in type, the pipe runs in COPY's binary format, and the
    staged rows read back as the source's; the rows staged are counted per split, in the group's order."""
    name, conn = pg_target
    statements = ["CREATE DOMAIN positive_int AS integer CHECK (VALUE > 0)",
                  f"CREATE TABLE tricky ({BINARY_COLUMNS})", f"INSERT INTO tricky VALUES {', '.join(BINARY_ROWS)}"]
    with source_database(servers, "postgres", unique_name, statements) as src:
        splits, export = _export(servers, unique_name)
        assert export.how.binary and all(s.endswith("TO STDOUT (FORMAT binary)") for s in export.how.statements)
        with conn.cursor() as cur:
            staged = BINARY_COLUMNS.replace(" PRIMARY KEY", "").replace("positive_int", "integer")
            cur.execute(f"CREATE TABLE staged (_cdc_split int, {staged})")
        write = CopyWrite(postgres_args(DbUrl.parse(servers.postgres.url(name))), "COPY staged FROM STDIN")
        counts = stage(spark, export, write, 100)
        with src.cursor() as cur:
            cur.execute("SET TimeZone = UTC")
            cur.execute("SELECT tricky::text FROM tricky ORDER BY id")
            want = cur.fetchall()
    with conn.cursor() as cur:
        cur.execute("SELECT _cdc_split, count(*) FROM staged GROUP BY 1")
        staged_counts = dict(cur.fetchall())
        assert counts == [staged_counts.get(s.index, 0) for s in splits] and sum(counts) == len(BINARY_ROWS)
        cur.execute("ALTER TABLE staged DROP COLUMN _cdc_split")
        cur.execute("SET TimeZone = UTC")
        cur.execute("SELECT staged::text FROM staged ORDER BY id")
        got = cur.fetchall()
    assert got == want


def test_binary_pipe_only_where_every_staging_column_is_the_source_type():
    from cdc_assets.core.tables import Column, Kind, TableSchema
    from cdc_assets.sources.postgres.source import binary_copy

    def schema(*natives: str) -> TableSchema:
        columns = tuple(Column(f"c{i}", Kind.INT if i == 0 else Kind.STRING, native) for i, native in enumerate(natives))
        return TableSchema(TableId("public", "t"), columns, ("c0",))

    same = TargetFormat("postgres", RowFormat.COPY_TEXT, lambda c, in_key: c.native)
    assert binary_copy(schema("integer", "character varying(64)", "numeric(12,2)", "timestamp(6) with time zone"), same)
    # Arrays and user-defined types carry OIDs in their binary form; money and inet are left to text.
    for native in ("integer[]", "text[]", "money", "inet", "mood", "bit varying(8)", "hstore"):
        assert not binary_copy(schema("integer", native), same), native
    as_text = TargetFormat("postgres", RowFormat.COPY_TEXT, lambda c, in_key: "text" if c.name == "c1" else c.native)
    assert not binary_copy(schema("integer", "character varying(64)"), as_text)  # an enum staged as its label
    assert not binary_copy(schema("integer", "text"), TargetFormat("mysql", RowFormat.COLUMNS, lambda c, k: c.native))


def test_per_task_runs_each_index_in_its_own_task_and_keeps_their_order(spark):
    from pyspark import TaskContext

    from cdc_assets.spark.staging import per_task

    def partition(i: int) -> int:
        return i * 100 + TaskContext.get().partitionId()

    assert per_task(spark, 5, partition) == [0, 101, 202, 303, 404]
