"""Type fidelity matrix: after a snapshot, every value reads back equal on the target, in all four
directions. Where no lossless mapping exists the README documents it and `CONVERTED` names the conversion
this test applies before comparing (and nothing else is converted)."""
import datetime as dt
import json
import struct
import uuid

import pytest

from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets_tests.support import config_for, source_database

MYSQL_DDL = """CREATE TABLE types_t (
  id INT PRIMARY KEY, ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, mi MEDIUMINT, i INT, iu INT UNSIGNED,
  bi BIGINT, bu BIGINT UNSIGNED, d65 DECIMAL(65,30), dec2 DECIMAL(12,2), f FLOAT, db DOUBLE,
  ch CHAR(10), vc VARCHAR(100), tx TEXT, bn BINARY(4), vb VARBINARY(20), bl BLOB,
  dte DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), yr YEAR, js JSON,
  en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(10), bo BOOLEAN)"""
MYSQL_ROWS = [
    "(1, 127, 255, 32767, 8388607, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,"
    " '12345678901234567890123456789012345.123456789012345678901234567891', 9999999999.99, 3.14, 1.7976931348623157e308,"
    " 'abc', 'emoji 🚀 and ünïcode', REPEAT('long text ', 500), X'00FF10AB', X'DEADBEEF', X'00010203',"
    " '9999-12-31', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999', '838:59:59.000000', 2155,"
    " '{\"a\": [1, 2, {\"b\": null}], \"s\": \"🚀\"}', 'c', 'x,z', b'1010101010', TRUE)",
    "(2, -128, 0, -32768, -8388608, -2147483648, 0, -9223372036854775808, 0,"
    " '-0.000000000000000000000000000001', -0.01, -1.5e-38, 5e-324,"
    " '', '', '', X'00000000', X'', X'',"
    " '1000-01-01', '1000-01-01 00:00:00.000000', '1970-01-01 00:00:01.000001', '-838:59:59.000000', 1901,"
    " '[]', 'a', '', b'0000000001', FALSE)",
    "(3," + ", ".join(["NULL"] * 28) + ")",
]

PG_DDL = """CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE app.types_t (
  id INT PRIMARY KEY, sm SMALLINT, i INT, bi BIGINT, num NUMERIC(65,30), numu NUMERIC, r REAL, dp DOUBLE PRECISION,
  ch CHAR(10), vc VARCHAR(100), tx TEXT, byt BYTEA, dte DATE, ts TIMESTAMP(6), tstz TIMESTAMPTZ(6), tm TIME(6),
  iv INTERVAL, js JSON, jb JSONB, uu UUID, ia INT[], ta TEXT[], bo BOOLEAN, bt BIT(10), mo mood)"""
PG_ROWS = [
    "(1, 32767, 2147483647, 9223372036854775807, '12345678901234567890123456789012345.123456789012345678901234567891',"
    " 123456789.123456789, 3.4028235e38, 1.7976931348623157e308, 'abc', 'emoji 🚀 and ünïcode', repeat('long text ', 500),"
    " '\\x00ff10ab', '9999-12-31', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999+00', '23:59:59.999999',"
    " '1 year 2 mons 3 days 04:05:06.789', '{\"a\": [1, 2]}', '{\"b\": {\"c\": \"🚀\"}}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',"
    " '{1,2,3}', '{\"x\",\"y z\"}', TRUE, B'1010101010', 'happy')",
    "(2, -32768, -2147483648, -9223372036854775808, '-0.000000000000000000000000000001', -0.5, -1.17549435e-38, 5e-324,"
    " '', '', '', '\\x', '1000-01-01', '1000-01-01 00:00:00', '1970-01-01 00:00:01.000001+00', '00:00:00',"
    " '-3 days -00:00:01', '[]', '{}', '00000000-0000-0000-0000-000000000000', '{}', '{}', FALSE, B'0000000001', 'sad')",
    "(3," + ", ".join(["NULL"] * 24) + ")",
]

# Conversions for the cross-engine directions, each a documented mapping (README "Type mapping").
BIT_COLUMNS = {"bt"}
# MySQL's text protocol prints FLOAT with 6 digits; read it as DOUBLE and compare single-precision values.
FLOAT32_COLUMNS = {"f", "r"}
JSON_COLUMNS = {"js", "jb", "ia", "ta"}


def canonical(name: str, value):
    if value is None:
        return None
    if isinstance(value, memoryview):
        value = bytes(value)
    if name in FLOAT32_COLUMNS:
        return struct.unpack("f", struct.pack("f", value))[0]
    if name in BIT_COLUMNS and isinstance(value, bytes):
        return format(int.from_bytes(value, "big"), "010b")  # MySQL returns BIT as bytes, PostgreSQL as '0101'
    if name in JSON_COLUMNS:
        return json.dumps(json.loads(value) if isinstance(value, str) else value, sort_keys=True)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, dt.time):  # PostgreSQL time -> MySQL TIME (timedelta)
        return dt.timedelta(hours=value.hour, minutes=value.minute, seconds=value.second, microseconds=value.microsecond)
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
        else:
            select = "*"
        cur.execute(f"SELECT {select} FROM {table_sql} ORDER BY id")
        rows = cur.fetchall()
    return [{n: canonical(n, v) for n, v in zip(names, row)} for row in rows]


@pytest.fixture
def source(request, servers, unique_name):
    kind = request.param
    if kind == "mysql":
        seed, table, sql = [MYSQL_DDL, "INSERT INTO types_t VALUES " + ", ".join(MYSQL_ROWS)], f"{unique_name}.types_t", "types_t"
    else:
        seed, table, sql = ["CREATE SCHEMA app", PG_DDL, "INSERT INTO app.types_t VALUES " + ", ".join(PG_ROWS)], \
            "app.types_t", "app.types_t"
    with source_database(servers, kind, unique_name, seed) as conn:
        yield kind, unique_name, table, conn, sql


def snapshot(tmp_path, servers, spark, source, target_kind, target_db):
    kind, db, table, _, _ = source
    config = config_for(tmp_path, servers, task_id="types", source=kind, source_db=db, tables=[table],
                        target=target_kind, target_db=target_db, snapshot={"split_size": 2})
    rt = TaskRuntime(config)
    rt.adopt_spark(spark)
    try:
        [tp] = ensure_plans(rt)
        results = snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
    finally:
        rt.close(stop_spark=False)
    assert sum(r.rows for r in results) == 3


def target_conn(servers, target_kind, target_db):
    if target_kind == "postgres":
        servers.postgres.create_database(target_db)
        return servers.postgres.connect(target_db)
    servers.mariadb.create_database(target_db)
    return servers.mariadb.connect(target_db)


@pytest.mark.parametrize("source, target_kind", [
    ("mysql", "postgres"), ("postgres", "postgres"), ("mysql", "mysql"), ("postgres", "mysql"),
], indirect=["source"])
def test_values_survive_the_snapshot(tmp_path, servers, spark, unique_name, source, target_kind):
    kind, db, table, src_conn, src_sql = source
    target_db = f"{unique_name}_to_{target_kind}"
    tgt = target_conn(servers, target_kind, target_db)
    snapshot(tmp_path, servers, spark, source, target_kind, target_db)
    ns, name = table.split(".")
    tgt_sql = f'"{ns}"."{name}"' if target_kind == "postgres" else f"`{ns}`.`{name}`"
    expected = read_table(src_conn, src_sql if kind == "postgres" else f"`{db}`.`types_t`")
    actual = read_table(tgt, tgt_sql)
    if (kind, target_kind) == ("postgres", "mysql"):
        expected = postgres_to_mysql_expected(src_conn, expected)
    assert len(actual) == 3
    for exp, act in zip(expected, actual):
        for column in exp:
            assert act[column] == exp[column], f"{kind}->{target_kind} row {exp['id']} column {column}"
    tgt.close()


def postgres_to_mysql_expected(src_conn, rows):
    """README "Type mapping": PostgreSQL INTERVAL lands as PostgreSQL's own text; MySQL returns CHAR(n)
    without the trailing pad spaces PostgreSQL returns (both treat them as insignificant)."""
    with src_conn.cursor() as cur:
        cur.execute("SELECT iv::text FROM app.types_t ORDER BY id")
        texts = [r[0] for r in cur.fetchall()]
    return [{**row, "iv": text, "ch": row["ch"] and row["ch"].rstrip(" ")} for row, text in zip(rows, texts)]
