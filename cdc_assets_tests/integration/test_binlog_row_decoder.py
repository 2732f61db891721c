"""The specialised row decoder (sources/mysql/row_decoder.py) reads every value of every column kind exactly as the
library's decode plus our normalisation does: the same changes, value for value and type for type, read from the
same binlog once each way."""
from dataclasses import replace

import pytest

from cdc_assets.core.events import Transaction
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.sources.mysql.binlog import BinlogReader
from cdc_assets.sources.mysql.row_decoder import RowDecoders
from cdc_assets.sources.mysql.source import MysqlSource
from cdc_assets.sources.mysql.zero_dates import ZeroDates
from cdc_assets_tests.support import execute, source_database

DDL = """CREATE TABLE every_kind (
  id INT PRIMARY KEY, ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT,
  miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED, f FLOAT, db DOUBLE,
  d65 DECIMAL(65,30), d12 DECIMAL(12,2), d10 DECIMAL(10,0), d5 DECIMAL(5,5), d18 DECIMAL(18,9), d19 DECIMAL(19,10),
  du DECIMAL(8,3) UNSIGNED,
  ch CHAR(10), ch4 CHAR(100), vc VARCHAR(100), vc3 VARCHAR(300), l1 VARCHAR(20) CHARACTER SET latin1,
  u3 VARCHAR(20) CHARACTER SET utf8mb3, sw VARCHAR(10) CHARACTER SET swe7,
  tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT, js JSON,
  bn BINARY(4), vb VARBINARY(20), tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
  dte DATE, dt0 DATETIME, dt3 DATETIME(3), dt6 DATETIME(6), ts0 TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL,
  tm0 TIME, tm1 TIME(1), tm2 TIME(2), tm3 TIME(3), tm6 TIME(6), yr YEAR,
  en ENUM('a','b','c'), st SET('x','y','z'), st10 SET('a','b','c','d','e','f','g','h','i','j'),
  b1 BIT(1), b10 BIT(10), b64 BIT(64), uu UUID, gm GEOMETRY, pt POINT)"""
COLUMNS = 59
ROWS = [
    "(1, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, "
    " 18446744073709551615, 3.14, 1.7976931348623157e308, "
    " '12345678901234567890123456789012345.123456789012345678901234567891', 9999999999.99, 9999999999, 0.99999,"
    " 999999999.999999999, 999999999.9999999999, 99999.999,"
    " 'abc', REPEAT('🚀', 100), 'emoji 🚀 and ünïcode', REPEAT('ü', 300), 'façade é', 'mb3 ü', 'abc',"
    " 't', 'text', 'medium', REPEAT('long ', 1000), '{\"a\": [1, 2.5, null]}',"
    " X'00FF10AB', X'DEADBEEF', X'01', X'00010203', X'FF', REPEAT(X'AB', 70000),"
    " '9999-12-31', '9999-12-31 23:59:59', '9999-12-31 23:59:59.999', '9999-12-31 23:59:59.999999',"
    " '2038-01-19 03:14:07', '2038-01-19 03:14:07.999999',"
    " '838:59:59', '838:59:59.9', '838:59:59.99', '838:59:59.999', '838:59:59.999999', 2155,"
    " 'c', 'x,z', 'a,c,j', b'1', b'1010101010', b'1111111111111111111111111111111111111111111111111111111111111111',"
    " '123e4567-e89b-12d3-a456-426614174000', ST_GeomFromText('LINESTRING(0 0,1 1.5)'), ST_GeomFromText('POINT(1 2)'))",
    "(2, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0, -1.5e-38, 5e-324,"
    " '-0.000000000000000000000000000001', -0.01, -9999999999, -0.00001, -0.000000001, -123456789.0123456789, 0,"
    " '', '', '', '', '', '', '',"
    " '', '', '', '', '[]',"
    " X'00000000', X'', X'', X'', X'', X'',"
    " '1000-01-01', '1000-01-01 00:00:00', '1000-01-01 00:00:00.001', '1000-01-01 00:00:00.000001',"
    " '1970-01-01 00:00:01', '1970-01-01 00:00:01.000001',"
    " '-838:59:59', '-00:00:01.1', '-00:00:01.10', '-00:00:00.001', '-00:00:01.500000', 1901,"
    " 'a', '', '', b'0', b'0000000001', b'0', '00000000-0000-0000-0000-000000000000',"
    " ST_GeomFromText('POINT(0 0)'), ST_GeomFromText('POINT(-1.5e300 5e-324)'))",
    "(3," + ", ".join(["NULL"] * (COLUMNS - 1)) + ")",
    "(4, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, -0.0, -0.0, 0, 0.5, 0, 0, -1, 1.5, 0.001,"
    " 'a', 'b', 'tab\there', 'x', 'ß', 'ß', 'z', 'line\nbreak', 'x', 'y', 'z', '{\"k\": 1.5e3}',"
    " X'61', X'00', X'00', X'0000', X'00', X'00',"
    " '2024-02-29', '2024-02-29 12:00:00', '2024-02-29 12:00:00.5', '2024-02-29 12:00:00.5',"
    " '2000-01-01 00:00:00', '2000-01-01 00:00:00.5',"
    " '-00:00:01', '-05:00:00.0', '-00:00:00.99', '12:34:56.789', '-838:59:58.999999', 2000,"
    " 'b', 'y', 'j', b'1', b'0', b'1000000000000000000000000000000000000000000000000000000000000001',"
    " 'ffffffff-ffff-ffff-ffff-ffffffffffff', ST_GeomFromText('POINT(0 0)'), NULL)",
    # Zero dates (the session's sql_mode lets them in): ZERO_DATE both ways (the reader would stop on them).
    "(5, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 'z', 'z', 'z', 'z', 'z', 'z', 'z',"
    " 'z', 'z', 'z', 'z', '1', X'01', X'01', X'01', X'01', X'01', X'01',"
    " '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '2024-00-10 00:00:00', '0000-00-00 00:00:00',"
    " '0000-00-00 00:00:00', '00:00:00', '00:00:00.0', '00:00:00.00', '00:00:00.000', '00:00:00.000000', 0,"
    " '', 'x', 'a', b'0', b'0', b'0', NULL, NULL, NULL)",
]


def changes(url: DbUrl, schemas: dict, start, stop) -> list:
    reader = BinlogReader(url, 4_343_434, schemas)
    return [c for item in reader.read(start, stop) if isinstance(item, Transaction) for c in item.changes]


@pytest.fixture(autouse=True)
def zero_dates_compared(monkeypatch):
    """The decoders' ZERO_DATE compared as they make it: the reader's check stops on them (test_zero_dates_log.py)."""
    monkeypatch.setattr(ZeroDates, "check", lambda self, image, *args, **kwargs: image)


@pytest.fixture
def logged(servers, unique_name):
    """(url, described schema, start, end) of a binlog holding inserts, updates of every column and deletes of
    rows with every column kind, NULLs, zero dates and the extremes of each kind."""
    with source_database(servers, "mysql", unique_name, [DDL.replace("every_kind", "t")]) as src:
        url = DbUrl.parse(servers.mariadb.url(unique_name))
        source = MysqlSource(url)
        try:
            start = source.current_position()
            execute(src, "SET SESSION sql_mode = ''", f"INSERT INTO t VALUES {', '.join(ROWS)}",
                    "INSERT INTO t SELECT id + 10, ti, tiu, si, siu, mi, miu, i, iu, bi, bu, f, db, d65, d12, d10, d5, "
                    "d18, d19, du, ch, ch4, vc, vc3, l1, u3, sw, tt, tx, mt, lt, js, bn, vb, tb, bl, mb, lb, dte, dt0, "
                    "dt3, dt6, ts0, ts6, tm0, tm1, tm2, tm3, tm6, yr, en, st, st10, b1, b10, b64, uu, gm, pt FROM t",
                    # Every column of rows 11..15 takes the values of the row before it (row 11 those of row 15).
                    "UPDATE t AS a JOIN t AS b ON b.id = IF(a.id = 11, 5, a.id - 11) SET a.ti = b.ti, a.d65 = b.d65, "
                    "a.vc = b.vc, a.lt = b.lt, a.bn = b.bn, a.dte = b.dte, a.dt6 = b.dt6, a.ts6 = b.ts6, "
                    "a.tm2 = b.tm2, a.st = b.st, a.b64 = b.b64, a.uu = b.uu, a.pt = b.pt WHERE a.id > 10",
                    "DELETE FROM t WHERE id IN (2, 3, 13)")
            end = source.current_position()
            schema = source.describe(TableId(unique_name, "t"))
        finally:
            source.close()
        yield url, schema, start, end


def test_the_specialised_decoder_reads_every_kind_as_the_library_and_normalisation_do(logged, monkeypatch):
    url, schema, start, end = logged
    decoded = []  # the images the specialised decoder made: the test compares something
    fast_rows, fast_pairs = RowDecoders.rows, RowDecoders.pairs
    monkeypatch.setattr(RowDecoders, "rows", lambda *a: decoded.append(fast_rows(*a)) or decoded[-1])
    monkeypatch.setattr(RowDecoders, "pairs", lambda *a: decoded.append(fast_pairs(*a)) or decoded[-1])
    fast = changes(url, {schema.table: schema}, start, end)
    monkeypatch.setattr(RowDecoders, "rows", lambda *a: None)  # every event the library's way
    monkeypatch.setattr(RowDecoders, "pairs", lambda *a: None)
    library = changes(url, {schema.table: schema}, start, end)

    assert len(fast) == 10 + 5 + 3
    assert decoded and all(images is not None for images in decoded)
    assert [repr(c) for c in fast] == [repr(c) for c in library]  # repr: 1 == 1.0 == True, Decimal 1.5 == 1.50
    assert [repr(c.after) for c in fast if c.after] == [repr(c.after) for c in library if c.after]


def test_columns_the_described_table_lacks_are_left_out_by_the_specialised_decoder_too(logged, monkeypatch):
    url, schema, start, end = logged
    narrow = replace(schema, columns=tuple(c for c in schema.columns if c.name not in ("d65", "vc", "st")))
    fast = changes(url, {narrow.table: narrow}, start, end)
    monkeypatch.setattr(RowDecoders, "rows", lambda *a: None)
    monkeypatch.setattr(RowDecoders, "pairs", lambda *a: None)
    library = changes(url, {narrow.table: narrow}, start, end)

    assert len(fast) == 18 and not any("d65" in (c.after or c.before) for c in fast)
    assert [repr(c) for c in fast] == [repr(c) for c in library]
