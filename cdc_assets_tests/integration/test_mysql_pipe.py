"""A MariaDB source's export for a PostgreSQL target is one `SELECT` of the COPY line per split (CopyOutExport,
client "mysql"), read by a Spark task with the C client and piped into the staging COPY: its lines are byte for
byte the JDBC export's lines for the same splits, on values COPY must escape and values MariaDB renders in
session-dependent ways, and the staged rows are the source's."""
import traceback

import psycopg2
import pytest

from cdc_assets.core.boundary import CopyOutExport, CopyWrite, JdbcExport, RowFormat, TargetFormat
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import mysqlclient_args, postgres_args
from cdc_assets.sources.base import SqlSource
from cdc_assets.sources.mysql.source import MysqlSource
from cdc_assets.spark.staging import read_export, stage
from cdc_assets_tests.support import source_database

COLUMNS = """id INT PRIMARY KEY, t TEXT, l VARCHAR(20) CHARACTER SET latin1, b VARBINARY(8), dt DATETIME(6),
ts TIMESTAMP(3) NULL, d DATE, tm TIME(6), y YEAR, n DECIMAL(30,10), f FLOAT, g DOUBLE, bits BIT(10),
e ENUM('a','b c'), s SET('x','y'), j JSON, u BIGINT UNSIGNED, tiny TINYINT(1)"""
ROWS = [
    "(1, 'tab\\there\\nnew\\rline\\\\back \\\\N ünïcødé ✓ 😀', 'café', X'00ff5c0a', '2024-01-02 03:04:05.123456', "
    "'2024-01-02 03:04:05.5', '2024-02-29', '-838:59:59.000000', 2155, 12345678901234567890.0123456789, "
    "3.40282e38, 1e-300, b'0000000101', 'b c', 'x,y', '{\"k\": \"v\\\\n\\\\t\", \"x\": [1.50, 2e3]}', "
    "18446744073709551615, 2)",
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(3, '', '', X'', '1000-01-01 00:00:00', '1970-01-01 00:00:01', '9999-12-31', '00:00:00', 1901, -0.0000000001, "
    "-0, -1.7976931348623157e308, b'0', 'a', '', 'null', 0, -128)",
    "(4, '\\\\N', 'NULL', X'5c5c78', '2000-01-01 00:00:00.000001', '2038-01-19 03:14:07.999', '2000-01-01', "
    "'23:59:59.999999', 2000, 0, 0.1, 0.1, b'1111111111', NULL, 'y', '[]', 1, 0)",
    "(5, 'vt\\x0b ff\\x0c bell\\x07 \\x01', ' sp ', NULL, NULL, NULL, NULL, NULL, NULL, "
    "99999999999999999999.9999999999, 1.17549e-38, 2.2250738585072014e-308, NULL, NULL, NULL, '\"\\\\u00e9\"', "
    "NULL, 127)",
]


def _source(servers, name: str):
    statements = [f"CREATE TABLE tricky ({COLUMNS})", f"INSERT INTO tricky VALUES {', '.join(ROWS)}"]
    return source_database(servers, "mysql", name, statements)


def _target() -> TargetFormat:
    return TargetFormat("postgres", RowFormat.COPY_TEXT, lambda c, in_key: c.native)


def _open(servers, name: str, pipe: bool = True) -> MysqlSource:
    return MysqlSource(DbUrl.parse(servers.mariadb.url(name)), pipe=pipe)


def _exports(servers, name: str):
    source = _open(servers, name)
    try:
        schema = source.describe(TableId(name, "tricky"))
        plan = source.plan(schema, 2)
        splits = list(plan.splits)
        return splits, source.export(plan, schema, splits, _target()), SqlSource.export(
            source, plan, schema, splits, _target())
    finally:
        source.close()


def _staging(servers, name: str, conn) -> CopyWrite:
    """`staged` in the target database `name`: the split index, then `tricky`'s columns in PostgreSQL types."""
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE staged (_cdc_split int, id int, t text, l text, b bytea, dt timestamp(6), "
                    "ts timestamp(3), d date, tm interval, y smallint, n numeric(30,10), f float8, g float8, "
                    "bits bit(10), e text, s text, j jsonb, u numeric(20), tiny smallint)")
    return CopyWrite(postgres_args(DbUrl.parse(servers.postgres.url(name))), "COPY staged FROM STDIN")


def _lines(export: CopyOutExport) -> list[bytes]:
    from MySQLdb import _mysql

    conn, lines = _mysql.connect(**export.connect_args), []
    try:
        for statement in export.statements:
            conn.query(statement)
            lines += [row[0] for row in conn.store_result().fetch_row(maxrows=0)]
    finally:
        conn.close()
    return lines


def test_piped_lines_are_the_jdbc_lines_byte_for_byte(servers, spark, unique_name):
    with _source(servers, unique_name):
        splits, export, jdbc = _exports(servers, unique_name)
        assert len(splits) >= 2
        assert isinstance(export.how, CopyOutExport) and export.how.client == "mysql"
        assert isinstance(jdbc.how, JdbcExport)
        assert len(export.how.statements) == len(splits) and export.how.predicates == jdbc.how.predicates
        piped = _lines(export.how)
        lines = [r["line"].encode() for r in read_export(spark, jdbc, 100).select("line").collect()]
    assert len(piped) == len(ROWS)
    assert sorted(piped) == sorted(lines)


def test_the_pipe_stages_every_split_with_the_source_values(servers, spark, pg_target, unique_name):
    name, conn = pg_target
    with _source(servers, unique_name) as src:
        splits, export, _ = _exports(servers, unique_name)
        write = _staging(servers, name, conn)
        assert sum(stage(spark, export, write, 100)) == len(ROWS)
        with src.cursor() as cur:
            cur.execute("SELECT id, t, l, HEX(b), CAST(n AS CHAR), CAST(u AS CHAR), tiny, dt, ts, d, tm FROM tricky "
                        "ORDER BY id")
            want = cur.fetchall()
    with conn.cursor() as cur:
        cur.execute("SELECT count(DISTINCT _cdc_split) FROM staged")
        assert cur.fetchone()[0] == len(splits)
        cur.execute("SELECT id, t, l, upper(encode(b, 'hex')), n::text, u::text, tiny, dt, ts, d, tm FROM staged "
                    "ORDER BY id")
        got = cur.fetchall()
    assert [tuple(r) for r in got] == [tuple(r) for r in want]


def test_a_failed_select_raises_the_database_message(servers, pg_target, unique_name):
    from cdc_assets.spark.copy_pipe import CopyOutFailed, pipe_split
    from cdc_assets.spark.errors import root_cause

    name, conn = pg_target
    with _source(servers, unique_name):
        source_args = mysqlclient_args(DbUrl.parse(servers.mariadb.url(unique_name)))
        target_args = postgres_args(DbUrl.parse(servers.postgres.url(name)))
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE narrow (id int)")
        table = f"`{unique_name}`.tricky"
        with pytest.raises(psycopg2.Error, match="extra data after last expected column"):  # the target's side
            pipe_split(source_args, f"SELECT CONCAT_WS('\\t', id, id) FROM {table}", target_args,
                       "COPY narrow FROM STDIN", client="mysql")
        with pytest.raises(CopyOutFailed, match=r"Unknown column 'missing' in '[^']+' \(1054\)") as failed:
            pipe_split(source_args, f"SELECT missing FROM {table}", target_args, "COPY narrow FROM STDIN",
                       client="mysql")
        in_spark = Exception("".join(traceback.format_exception(failed.value)))  # what a PythonException says
        message = str(failed.value).split(": ", 1)[1]
        assert root_cause(in_spark) == (message, "in a Spark Python worker reading the source (SELECT)")
        wrong = {**source_args, "password": "not-the-password"}
        with pytest.raises(CopyOutFailed, match="Access denied") as refused:
            pipe_split(wrong, f"SELECT id FROM {table}", target_args, "COPY narrow FROM STDIN", client="mysql")
        assert "not-the-password" not in str(refused.value)
        assert pipe_split(source_args, f"SELECT id FROM {table}", target_args, "COPY narrow FROM STDIN",
                          client="mysql", chunk_rows=2) == len(ROWS)
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM narrow")
            assert cur.fetchone()[0] == len(ROWS)  # the failed pipes rolled back; the last one committed


def test_pipe_off_or_a_tls_login_reads_through_jdbc(servers, unique_name):
    url = servers.mariadb.url(unique_name)
    assert mysqlclient_args(DbUrl.parse(url + "?ssl-mode=REQUIRED")) is None  # TLS: the JDBC login, tested
    assert mysqlclient_args(DbUrl.parse(url))["password"] == DbUrl.parse(url).password
    with _source(servers, unique_name):
        source = _open(servers, unique_name, pipe=False)
        try:
            schema = source.describe(TableId(unique_name, "tricky"))
            plan = source.plan(schema, 2)
            assert not source.pipes_copy(_target())
            assert isinstance(source.export(plan, schema, list(plan.splits), _target()).how, JdbcExport)
        finally:
            source.close()


def test_a_row_longer_than_max_allowed_packet_stops_the_split_saying_so(servers, spark, pg_target, unique_name):
    """MariaDB returns NULL, with only a warning, for a COPY line longer than max_allowed_packet: both paths stop
    instead of staging a row short. The server's limit is lowered to 4 MiB for the readers' new connections."""
    from cdc_assets.spark.copy_pipe import LINE_TOO_LONG

    name, conn = pg_target
    with _source(servers, unique_name) as src:
        with src.cursor() as cur:
            cur.execute("ALTER TABLE tricky MODIFY t LONGTEXT")
            cur.execute("UPDATE tricky SET t = REPEAT('a', 3 << 20), j = JSON_ARRAY(REPEAT('b', 2 << 20)) "
                        "WHERE id = 3")
            cur.execute("SELECT LENGTH(t) + LENGTH(j), @@GLOBAL.max_allowed_packet FROM tricky WHERE id = 3")
            size, limit = cur.fetchone()
            assert size > 4 << 20
        splits, export, jdbc = _exports(servers, unique_name)
        write = _staging(servers, name, conn)
        with src.cursor() as cur:
            cur.execute("SET GLOBAL max_allowed_packet = %s", (4 << 20,))
        try:
            with pytest.raises(Exception) as piped:
                stage(spark, export, write, 100)
            assert LINE_TOO_LONG in str(piped.value)
            with pytest.raises(Exception) as read:
                stage(spark, jdbc, write, 100)
            assert LINE_TOO_LONG in str(read.value)
        finally:
            with src.cursor() as cur:
                cur.execute("SET GLOBAL max_allowed_packet = %s", (limit,))
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM staged WHERE id = 3")
        assert cur.fetchone()[0] == 0


ESCAPED_ALONE = ["", "plain", "back\\slash", "tab\there", "new\nline", "carriage\rreturn", "\\", "\t", "\n", "\r",
                 "\\N", "ünïcødé ✓ 😀 \t", "vt\x0b ff\x0c", "x" * (1 << 20) + "\n"]


@pytest.mark.parametrize("mariadb, collation", [(True, "utf8mb4_unicode_ci"), (True, "utf8mb4_bin"),
                                                (True, "latin1_swedish_ci"), (False, "utf8mb4_unicode_ci")],
                         ids=["scanned first", "scanned first, binary collation", "scanned first, converted",
                              "always replaced"])
def test_each_character_copy_escapes_is_escaped_alone_and_nothing_else(servers, unique_name, mariadb, collation):
    """The text field's SQL (`copy_field`) against the COPY escape of core/copy_text.py, value by value: each of
    backslash, tab, newline and carriage return alone in a value, none, several, a long one. MariaDB's form scans a
    value for them before replacing (a utf8mb4 column as it is, another one converted to utf8mb4 first); the other
    is MySQL 8's (regexp_time_limit), run here on MariaDB."""
    from cdc_assets.core.copy_text import escape
    from cdc_assets.core.tables import Column, Kind
    from cdc_assets.sources.mysql import types

    charset = collation.split("_")[0]
    values = [v for v in ESCAPED_ALONE if charset != "latin1" or v.isascii()]
    field = types.copy_field(Column("t", Kind.STRING, "longtext", collation=collation), "t", "text", mariadb)
    statements = [f"CREATE TABLE texts (id INT PRIMARY KEY, t LONGTEXT CHARACTER SET {charset} COLLATE {collation})"]
    with source_database(servers, "mysql", unique_name, statements) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO texts VALUES (%s, %s)", list(enumerate([*values, None])))
        cur.execute(f"SELECT id, {field} FROM texts ORDER BY id")
        got = [value for _, value in cur.fetchall()]
    assert got == [escape(v) for v in values] + [None]


def test_text_columns_of_different_collations_meet_in_one_copy_line(servers, unique_name):
    """A utf8mb4 column keeps its bytes under one collation label, a latin1 one is converted: one CONCAT_WS holds
    them all, with a temporal field beside them, and each renders as the escape of its value."""
    from cdc_assets.core.copy_text import escape
    from cdc_assets.core.tables import Column, Kind
    from cdc_assets.sources.mysql import types

    declared = {"a": ("utf8mb4", "utf8mb4_unicode_ci"), "b": ("utf8mb4", "utf8mb4_bin"),
                "c": ("utf8mb4", "utf8mb4_general_ci"), "l": ("latin1", "latin1_swedish_ci")}
    columns = [Column(name, Kind.STRING, "varchar(32)", collation=collation)
               for name, (_, collation) in declared.items()] + [Column("d", Kind.DATETIME, "datetime(6)")]
    line = types.copy_line([types.copy_field(c, c.name, "text", mariadb=True) for c in columns])
    texts = ", ".join(f"{name} VARCHAR(32) CHARACTER SET {charset} COLLATE {collation}"
                      for name, (charset, collation) in declared.items())
    row = ("Ünï\\ 😀", "tab\there", "Straße\n", "café\\\r", "2024-02-29 23:59:59.000001")
    statements = [f"CREATE TABLE texts (id INT PRIMARY KEY, {texts}, d DATETIME(6))"]
    with source_database(servers, "mysql", unique_name, statements) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO texts VALUES (1, %s, %s, %s, %s, %s)", row)
        cur.execute(f"SELECT {line} FROM texts")
        got = cur.fetchone()[0]
    assert got == "\t".join([escape(v) for v in row[:4]] + [row[4]])
