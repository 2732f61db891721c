"""Type fidelity matrix, in all four directions: after a snapshot every value reads back equal on the target,
and the same values written again through the log (an INSERT and an UPDATE of every column) render on the target
as exactly the text the snapshot's copy renders. Where no lossless mapping exists docs/connectors/ documents it and
the column sets below name the conversion this test applies before comparing (and nothing else is converted)."""
import datetime as dt
import json
import re
import secrets
import struct
import uuid
from decimal import Decimal

import pymysql
import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import SplitFailed, snapshot_splits
from cdc_assets.sinks import postgres_apply
from cdc_assets_tests.support import config_for, source_database

MYSQL_DDL = """CREATE TABLE types_t (
  id INT PRIMARY KEY, ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, mi MEDIUMINT, i INT, iu INT UNSIGNED,
  bi BIGINT, bu BIGINT UNSIGNED, d65 DECIMAL(65,30), dec2 DECIMAL(12,2), f FLOAT, db DOUBLE,
  ch CHAR(10), vc VARCHAR(100), tx TEXT, bn BINARY(4), vb VARBINARY(20), bl BLOB,
  dte DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), yr YEAR, js JSON,
  en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(10), bo BOOLEAN,
  c0 CHAR(0), v0 VARCHAR(0), fu FLOAT UNSIGNED, du DOUBLE UNSIGNED, decu DECIMAL(10,3) UNSIGNED, zf INT(6) ZEROFILL,
  dzf DECIMAL(8,2) ZEROFILL, gm GEOMETRY, pt POINT, pg POLYGON, mp MULTIPOINT, gc GEOMETRYCOLLECTION)"""
MYSQL_ROWS = [
    "(1, 127, 255, 32767, 8388607, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,"
    " '12345678901234567890123456789012345.123456789012345678901234567891', 9999999999.99, 3.14, 1.7976931348623157e308,"
    " 'abc', 'emoji 🚀 and ünïcode', REPEAT('long text ', 500), X'00FF10AB', X'DEADBEEF', X'00010203',"
    " '9999-12-31', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999', '838:59:59.000000', 2155,"
    " '{\"a\": [1, 2, {\"b\": null}], \"s\": \"🚀\"}', 'c', 'x,z', b'1010101010', TRUE,"
    " '', '', 3.4028234e38, 1.7976931348623157e308, 9999999.999, 999999, 999999.99,"
    " ST_GeomFromText('LINESTRING(0 0,1 1.5)', 4326), ST_GeomFromText('POINT(1 2)'),"
    " ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))'), ST_GeomFromText('MULTIPOINT(1 1,2 2)'),"
    " ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))'))",
    "(2, -128, 0, -32768, -8388608, -2147483648, 0, -9223372036854775808, 0,"
    " '-0.000000000000000000000000000001', -0.01, -1.5e-38, 5e-324,"
    " '', '', '', X'00000000', X'', X'',"
    " '1000-01-01', '1000-01-01 00:00:00.000000', '1970-01-01 00:00:01.000001', '-838:59:59.000000', 1901,"
    " '[]', 'a', '', b'0000000001', FALSE,"
    " '', '', 0, 0, 0, 0, 0, ST_GeomFromText('POINT(0 0)', 3857), ST_GeomFromText('POINT(-1.5e300 5e-324)'),"
    " NULL, NULL, ST_GeomFromText('GEOMETRYCOLLECTION EMPTY'))",
    "(3," + ", ".join(["NULL"] * 40) + ")",
    "(4, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0.5, -0.0, -0.0, 'a', 'tab\there', 'line\nbreak \\\\ back', X'61', X'00', X'00',"
    " '2024-02-29', '2024-02-29 12:00:00.5', '2000-01-01 00:00:00', '-00:00:01.500000', 2000,"
    " '{\"k\": 1.5e3}', 'b', 'y', b'0', 2,"
    " NULL, '', 1.5, 5e-324, 0.001, 42, 3.5, ST_GeomFromText('POINT(0 0)'), NULL, NULL, NULL, NULL)",
]

BIG = secrets.token_hex(20_000)  # incompressible: PostgreSQL TOASTs it, and leaves it out of an update not changing it
PG_DDL = """CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS integer CHECK (VALUE > 0); CREATE DOMAIN stamp AS timestamptz(3);
CREATE DOMAIN code AS varchar(5);
CREATE TABLE app.types_t (
  id INT PRIMARY KEY, sm SMALLINT, i INT, bi BIGINT, num NUMERIC(65,30), numu NUMERIC, r REAL, dp DOUBLE PRECISION,
  ch CHAR(10), vc VARCHAR(100), tx TEXT, byt BYTEA, dte DATE, ts TIMESTAMP(6), tstz TIMESTAMPTZ(6), tm TIME(6),
  iv INTERVAL, js JSON, jb JSONB, uu UUID, ia INT[], ta TEXT[], bo BOOLEAN, bt BIT(10), mo mood, bv BIT VARYING,
  da DATE[], tsa TIMESTAMPTZ[],
  mn MONEY, ine INET, ci CIDR, mac MACADDR, m8 MACADDR8, tsv TSVECTOR, xm XML, hs HSTORE, i4r INT4RANGE,
  nr NUMRANGE, tzr TSTZRANGE, dr DATERANGE, pint posint, dts stamp, cd code)"""
PG_ROWS = [
    "(1, 32767, 2147483647, 9223372036854775807, '12345678901234567890123456789012345.123456789012345678901234567891',"
    " 123456789.123456789, 3.4028235e38, 1.7976931348623157e308, 'abc', 'emoji 🚀 and ünïcode', '" + BIG + "',"
    " '\\x00ff10ab', '9999-12-31', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999+00', '23:59:59.999999',"
    " '1 year 2 mons 3 days 04:05:06.789', '{\"a\": [1, 2]}', '{\"b\": {\"c\": \"🚀\"}}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',"
    " '{1,2,3}', '{\"x\",\"y z\"}', TRUE, B'1010101010', 'happy', B'101', '{2024-02-29,9999-12-31}',"
    " '{\"2000-02-29 12:00:00.5+02\",\"1970-01-01 00:00:00+00\"}',"
    " '1234.56', '192.168.1.5/24', '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05', 'a fat cat',"
    " '<a x=\"1\">t&amp;</a>', '\"k\"=>\"v\", \"a b\"=>NULL', '[1,10)', '(1.5,2.5]',"
    " '[\"2024-01-01 00:00:00+00\",\"2024-02-01 00:00:00+02\")', '[2024-01-01,infinity)', 1,"
    " '2024-01-01 12:00:00.123+05', 'ab')",
    "(2, -32768, -2147483648, -9223372036854775808, '-0.000000000000000000000000000001', -0.5, -1.17549435e-38, 5e-324,"
    " '', '', '', '\\x', '1000-01-01', '1000-01-01 00:00:00', '1970-01-01 00:00:01.000001+00', '00:00:00',"
    " '-3 days -00:00:01', '[]', '{}', '00000000-0000-0000-0000-000000000000', '{}', '{}', FALSE, B'0000000001', 'sad',"
    " B'', '{}', '{}',"
    " '-0.01', '::1', '::/0', '00:00:00:00:00:00', '00:00:00:00:00:00:00:00', '', '', '', 'empty', '(,)', 'empty',"
    " 'empty', 2147483647, '1970-01-01 00:00:00+00', '')",
    "(3," + ", ".join(["NULL"] * 42) + ")",
    "(4, 0, 0, 0, 0, 0, '-0', '-0', 'a', 'x', E'tab\\there', '\\x00', '2000-02-29', '2000-02-29 12:00:00.5',"
    " '2000-02-29 12:00:00.5+02', '24:00:00', '-1 mons +2 days -00:00:03.5', 'null', '\"s\"',"
    " 'ffffffff-ffff-ffff-ffff-ffffffffffff', '{NULL,1}', '{\"NULL\",NULL}', TRUE, B'0000000000', 'ok',"
    " B'0' || repeat('1', 69)::varbit, '{NULL}', '{\"2038-01-19 03:14:07.999999+00\"}',"
    " '92233720368547758.07', '2001:db8::1/64', '192.168.0.0/16', 'ff:ff:ff:ff:ff:ff', 'ff:ff:ff:ff:ff:ff:ff:ff',"
    " 'a:1A b:2B', '<r/>', '\"x\"=>\"1\"', '[-5,5]', '[0,)', '(,)', '[2000-02-29,2000-03-01)', 1, NULL, 'zzzzz')",
]
# Values no MySQL column holds (docs/connectors/postgres.md, "Type mapping"): PostgreSQL -> PostgreSQL only.
PG_ONLY_ROWS = [
    "(5, NULL, NULL, NULL, 'NaN', 'NaN', 'NaN', 'Infinity', NULL, NULL, NULL, NULL, 'infinity', '-infinity',"
    " 'infinity', '24:00:00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " '{infinity,-infinity,2024-01-01}', '{infinity,\"2020-01-01 00:00:00+00\"}'" + ", NULL" * 15 + ")",
    "(6, NULL, NULL, NULL, NULL, NULL, '-Infinity', '-Infinity', NULL, NULL, NULL, NULL, '-infinity', 'infinity',"
    " '-infinity', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL" + ", NULL" * 15 + ")",
]

# Conversions for the cross-engine directions, each a documented mapping (docs/connectors/, "Type mapping").
BIT_COLUMNS = {"bt"}
# MySQL's text protocol prints FLOAT with 6 digits; read it as DOUBLE and compare single-precision values.
FLOAT32_COLUMNS = {"f", "r", "fu"}
JSON_COLUMNS = {"js", "jb", "ia", "ta", "da", "tsa"}
# PostgreSQL types a MySQL target holds as their text (ranges: psycopg2 would read Range objects).
# MySQL spatial values: MySQL's form (4-byte SRID, WKB) on MySQL, their WKB in a PostgreSQL bytea.
GEOMETRY_COLUMNS = {"gm", "pt", "pg", "mp", "gc"}
TEXT_COLUMNS = {"mn", "ine", "ci", "mac", "m8", "tsv", "xm", "hs", "i4r", "nr", "tzr", "dr"}


def canonical(name: str, value):
    if value is None:
        return None
    if isinstance(value, (float, Decimal)) and value != value:
        return "NaN"  # equal to itself, as a stored NaN is
    if isinstance(value, memoryview):
        value = bytes(value)
    if name in FLOAT32_COLUMNS:
        return struct.unpack("f", struct.pack("f", value))[0]
    if name in BIT_COLUMNS and isinstance(value, bytes):
        return format(int.from_bytes(value, "big"), "010b")  # MySQL returns BIT as bytes, PostgreSQL as '0101'
    if name in JSON_COLUMNS:  # equal as JSON: key order, spacing and number spelling (1.5e3, 1500) aside
        return json.loads(value, parse_float=Decimal, parse_int=Decimal)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bool):
        return int(value)
    return value


def read_table(conn, table_sql: str):
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table_sql} WHERE 1 = 0")
        names = [d[0] for d in cur.description]
        if table_sql.startswith("`"):
            select = ", ".join(f"CAST(`{n}` AS DOUBLE)" if n in FLOAT32_COLUMNS else f"`{n}`" for n in names)
        else:  # JSON as its text, as MySQL returns it (psycopg2 would parse it); time as a duration (24:00 kept)
            select = ", ".join(f'to_json("{n}")::text' if n in JSON_COLUMNS else f'"{n}"::interval' if n == "tm"
                               else f'abbrev("{n}")' if n == "ine"  # the output function's text, as sent
                               else f'"{n}"::text' if n in TEXT_COLUMNS else f'"{n}"' for n in names)
        cur.execute(f"SELECT {select} FROM {table_sql} ORDER BY id")
        rows = cur.fetchall()
    return [{n: canonical(n, v) for n, v in zip(names, row)} for row in rows]


DIRECTIONS = [("mysql", "postgres"), ("postgres", "postgres"), ("mysql", "mysql"), ("postgres", "mysql")]
# A PostgreSQL target applies a small batch with VALUES statements and a large one through COPY (copy_rows.py):
# the log phase runs once each way.
RUNS = [(*d, "values") for d in DIRECTIONS] + [(*d, "copy") for d in DIRECTIONS if d[1] == "postgres"]


def seed_statements(kind: str, target_kind: str) -> tuple[list[str], list[str], str]:
    """DDL and rows for the source: the matrix rows 1..n; rows 201..200+n holding the matrix shifted by one
    (row 201 has row 2's values, ..., row 200+n row 1's); rows 301..300+n, copies of rows 1..n. The log rewrites
    the last two sets. Returns the seed, the rows, and the table's SQL name."""
    if kind == "mysql":
        ddl, rows, sql = [MYSQL_DDL], MYSQL_ROWS, "types_t"
    else:
        ddl = ["CREATE SCHEMA app", "CREATE EXTENSION hstore", PG_DDL]
        rows, sql = PG_ROWS + (PG_ONLY_ROWS if target_kind == "postgres" else []), "app.types_t"
    shifted = [with_id(rows[k % len(rows)], 201 + k - 1) for k in range(1, len(rows) + 1)]
    copies = [with_id(row, 301 + i) for i, row in enumerate(rows)]
    return [*ddl, f"INSERT INTO {sql} VALUES " + ", ".join(rows + shifted + copies)], rows, sql


def with_id(row: str, new_id: int) -> str:
    return re.sub(r"^\(\d+", f"({new_id}", row)


def snapshot(tmp_path, servers, spark, kind, db, table, target_kind, target_db, rows: int,
             target_server=None) -> TaskRuntime:
    config = config_for(tmp_path, servers, task_id="types", source=kind, source_db=db, tables=[table],
                        target=target_kind, target_db=target_db, target_server=target_server,
                        snapshot={"split_size": 2})
    rt = TaskRuntime(config)
    rt.adopt_spark(spark)
    try:
        [tp] = ensure_plans(rt)
        results = snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
    except BaseException:
        rt.close()
        raise
    assert sum(r.rows for r in results) == rows
    return rt


def target_conn(servers, target_kind, target_db, mysql_server):
    """MySQL targets live on `mysql_server`: into the source's own server, a MySQL -> MySQL task would write
    into the very table it reads (a table keeps its database name in the target)."""
    if target_kind == "postgres":
        servers.postgres.create_database(target_db)
        conn = servers.postgres.connect(target_db)
        with conn.cursor() as cur:
            cur.execute("CREATE EXTENSION hstore")  # docs/connectors/postgres.md: extension types need the extension on the target
        return conn
    return mysql_server.connect()


def through_the_log(conn, kind: str, sql: str, rows: list[str]) -> None:
    """The matrix again, written by the log, each statement its own transaction: the same rows inserted under
    ids 101..100+n; an UPDATE rewriting every column of rows 201..200+n with the values of rows 1..n; an UPDATE
    giving rows 301..300+n every column but `tx` of the next row (row 301 those of row 2, ..., row 300+n those
    of row 1). PostgreSQL leaves row 301's TOASTed `tx` out of it: a partial row, of which the sink writes only
    the columns it carries."""
    n = len(rows)
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {sql} WHERE 1 = 0")
        columns = [d[0] for d in cur.description if d[0] != "id"]
        cur.execute(f"INSERT INTO {sql} VALUES " + ", ".join(with_id(r, 101 + i) for i, r in enumerate(rows)))
        for first, source_id, names in ((201, "a.id - 200", columns),
                                        (301, f"(a.id - 300) % {n} + 1", [c for c in columns if c != "tx"])):
            match = f"a.id BETWEEN {first} AND {first + n - 1} AND b.id = {source_id}"
            if kind == "mysql":
                sets = ", ".join(f"a.`{c}` = b.`{c}`" for c in names)
                cur.execute(f"UPDATE {sql} a JOIN {sql} b ON {match} SET {sets}")
            else:
                sets = ", ".join(f'"{c}" = b."{c}"' for c in names)
                cur.execute(f"UPDATE {sql} a SET {sets} FROM {sql} b WHERE {match}")


def texts(conn, dialect: str, namespace: str, name: str) -> dict[int, dict[str, str | None]]:
    """Every row's columns as the server renders them as text: PostgreSQL `col::text`; MySQL `CAST(col AS
    CHAR)`, binary as HEX, BIT as its bit string, FLOAT at double precision (CHAR would show 6 digits)."""
    with conn.cursor() as cur:
        if dialect == "postgres":
            cur.execute("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                        "AND NOT attisdropped ORDER BY attnum", (f'"{namespace}"."{name}"',))
            columns = [(r[0], f'"{r[0]}"::text') for r in cur.fetchall()]
            table = f'"{namespace}"."{name}"'
        else:
            cur.execute("SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                        "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (namespace, name))
            columns = [(n, mysql_text(n, t.lower())) for n, t in cur.fetchall()]
            table = f"`{namespace}`.`{name}`"
        cur.execute(f"SELECT id, {', '.join(expr for _, expr in columns)} FROM {table} ORDER BY 1")
        return {row[0]: dict(zip([n for n, _ in columns], row[1:])) for row in cur.fetchall()}


def mysql_text(name: str, data_type: str) -> str:
    if "blob" in data_type or "binary" in data_type or name in GEOMETRY_COLUMNS:
        return f"HEX(`{name}`)"
    if data_type == "bit":
        return f"BIN(`{name}`)"
    if data_type == "float":
        return f"CAST(CAST(`{name}` AS DOUBLE) AS CHAR)"
    return f"CAST(`{name}` AS CHAR)"


@pytest.mark.parametrize("kind, target_kind, apply", RUNS)
def test_values_survive_the_snapshot_and_the_log(tmp_path, servers, mariadb_target, spark, unique_name, kind,
                                                 target_kind, apply, monkeypatch):
    """The snapshot writes every value equal to the source's; the log then writes each value again (an INSERT,
    an UPDATE of every column, an UPDATE of every column but one) and the target renders it as the very text the
    snapshot's copy renders."""
    if apply == "copy":
        monkeypatch.setattr(postgres_apply, "COPY_MIN_ROWS", 1)
    seed, rows, src_sql = seed_statements(kind, target_kind)
    table = f"{unique_name}.types_t" if kind == "mysql" else "app.types_t"
    namespace, name = table.split(".")
    target_db = f"{unique_name}_to_{target_kind}"
    with source_database(servers, kind, unique_name, seed) as src_conn:
        tgt = target_conn(servers, target_kind, target_db, mariadb_target)
        rt = snapshot(tmp_path, servers, spark, kind, unique_name, table, target_kind, target_db, 3 * len(rows),
                      mariadb_target if target_kind == "mysql" else None)
        try:
            tgt_sql = f'"{namespace}"."{name}"' if target_kind == "postgres" else f"`{namespace}`.`{name}`"
            expected = read_table(src_conn, src_sql if kind == "postgres" else f"`{unique_name}`.`types_t`")
            actual = read_table(tgt, tgt_sql)
            if (kind, target_kind) == ("postgres", "mysql"):
                expected = kind_to_mysql_expected(src_conn, expected)
            if (kind, target_kind) == ("mysql", "postgres"):
                expected = [{c: v[4:] if c in GEOMETRY_COLUMNS and v else v for c, v in row.items()} for row in expected]
            assert len(actual) == len(expected) == 3 * len(rows)
            for exp, act in zip(expected, actual):
                for column in exp:
                    assert act[column] == exp[column], f"{kind}->{target_kind} row {exp['id']} column {column}"

            through_the_log(src_conn, kind, src_sql, rows)
            report = sync(rt, until_caught_up=True)
            assert report.events >= len(rows)
        finally:
            rt.close()
        written = texts(tgt, target_kind, namespace, name)
        n = len(rows)
        differ = [f"row {i} ({via}) column {c}: {got!r}, the snapshot wrote {want!r}"
                  for i in range(1, n + 1) for c, want in written[i].items() if c != "id"
                  for via, j in (("insert", 100 + i), ("update", 200 + i),
                                 ("update without tx", 300 + i if c == "tx" else 300 + (i - 2) % n + 1))
                  if (got := written[j][c]) != want]
        assert not differ, f"{kind}->{target_kind}: the log wrote other text than the snapshot:\n" + "\n".join(differ)
        if kind == target_kind:  # same engine: every row, snapshot or log, renders as the source renders it
            assert written == texts(src_conn, kind, namespace, name)
        tgt.close()


@pytest.mark.parametrize("path", ["snapshot", "log"])
def test_an_infinite_timestamp_stops_a_mysql_target(tmp_path, servers, spark, unique_name, path):
    """docs/connectors/postgres.md, "Type mapping": MySQL has no infinite DATETIME. The snapshot and the log both stop on it with the
    server's error naming the column, rather than writing NULL or 9999-12-31."""
    seed = ["CREATE SCHEMA app", "CREATE TABLE app.inf_t (id INT PRIMARY KEY, tstz TIMESTAMPTZ(6))",
            "INSERT INTO app.inf_t VALUES (1, '2024-01-01 00:00:00+00')"]
    infinite = "INSERT INTO app.inf_t VALUES (2, 'infinity')"
    with source_database(servers, "postgres", unique_name, seed + ([infinite] if path == "snapshot" else [])) as conn:
        tgt = target_conn(servers, "mysql", f"{unique_name}_to_mysql", servers.mariadb)
        refused = "Incorrect datetime value: 'infinity' for column .*tstz"
        # The snapshot's commit fails as a SplitFailed carrying the server's words; the log's apply as PyMySQL's.
        with pytest.raises((pymysql.err.OperationalError, SplitFailed), match=refused):
            rt = snapshot(tmp_path, servers, spark, "postgres", unique_name, "app.inf_t", "mysql",
                          f"{unique_name}_to_mysql", 2 if path == "snapshot" else 1)
            try:
                if path == "log":
                    with conn.cursor() as cur:
                        cur.execute(infinite)
                    sync(rt, until_caught_up=True)
            finally:
                rt.close()
        written = texts(tgt, "mysql", "app", "inf_t")
        assert 2 not in written
        if path == "log":  # the snapshot's row stays as it was
            assert written == {1: {"id": "1", "tstz": "2024-01-01 00:00:00.000000"}}
        tgt.close()


def kind_to_mysql_expected(src_conn, rows):
    """docs/connectors/postgres.md, "Type mapping": PostgreSQL INTERVAL lands as PostgreSQL's own text; MySQL returns CHAR(n)
    without the trailing pad spaces PostgreSQL returns (both treat them as insignificant)."""
    with src_conn.cursor() as cur:
        cur.execute("SELECT iv::text FROM app.types_t ORDER BY id")
        texts = [r[0] for r in cur.fetchall()]
    return [{**row, "iv": text, "ch": row["ch"] and row["ch"].rstrip(" ")} for row, text in zip(rows, texts)]
