"""Binlog values become what the snapshot reads; DDL statements name the captured tables they touch."""
from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from pymysqlreplication.constants import FIELD_TYPE

from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.sources.mysql.ddl import ddl_tables
from cdc_assets.sources.mysql.stream import SERVER_ID_MIN, default_server_id
from cdc_assets.sources.mysql.table_map import adopt
from cdc_assets.sources.mysql.types import column_from_catalog, labels
from cdc_assets.sources.mysql.values import converter, converters, normalise_image
from cdc_assets.sources.mysql.zero_dates import ZERO_DATE


def col(name: str, kind: Kind, native: str, **kw) -> Column:
    return Column(name=name, kind=kind, native=native, **kw)


def convert(column: Column, value):
    conv = converter(column)
    return value if conv is None else conv(value)


@pytest.mark.parametrize("column, decoded, expected", [
    (col("b", Kind.BIT, "bit(10)", length=10), "101", "0000000101"),
    (col("b", Kind.BIT, "bit(10)", length=10), "1010101010", "1010101010"),
    (col("blob", Kind.BINARY, "blob"), "", b""),  # the library decodes an empty BLOB to ''
    (col("blob", Kind.BINARY, "blob"), b"\xff\x00", b"\xff\x00"),
    (col("vb", Kind.BINARY, "varbinary(10)", length=10), b"a", b"a"),
    (col("bn", Kind.BINARY, "binary(4)", length=4), b"a", b"a\0\0\0"),  # trailing zeros stripped in the binlog
    (col("bn", Kind.BINARY, "binary(4)", length=4), "", b"\0\0\0\0"),
    (col("j", Kind.JSON, "longtext"), '{"a": [1, 2.5]}', '{"a": [1, 2.5]}'),  # MariaDB: text already
    (col("j", Kind.JSON, "json"), {b"a": [1, b"x\xc3\xa9", None, True]}, '{"a": [1, "xé", null, true]}'),  # MySQL 8
    (col("j", Kind.JSON, "json"), b"just a string", '"just a string"'),
    (col("s", Kind.SET, "set('x','y','z')", values=("x", "y", "z")), {"z", "x"}, "x,z"),
    (col("s", Kind.SET, "set('it''s','b')", values=("it''s", "b")), {"b", "it's"}, "it's,b"),  # an older plan
    (col("s", Kind.SET, "set('It''s','b''''')", values=("It's", "b''"), charset="utf16"), {"b''", "It's"},
     "It's,b''"),  # labels described exactly
    (col("ts", Kind.TIMESTAMP, "timestamp(6)", precision=6), datetime(1970, 1, 1), ZERO_DATE),  # zero timestamp
    (col("ts", Kind.TIMESTAMP, "timestamp(6)", precision=6), datetime(2024, 1, 1, 0, 0, 0, 500000),
     datetime(2024, 1, 1, 0, 0, 0, 500000)),  # naive UTC, as the snapshot's UTC session reads it
    (col("y", Kind.YEAR, "year(4)"), 1900, 0),  # YEAR 0000
    (col("y", Kind.YEAR, "year(4)"), 2155, 2155),
    (col("u", Kind.UUID, "uuid"), b"\x12>Eg\xe8\x9b\x12\xd3\xa4VBf\x14\x17@", "123e4567-e89b-12d3-a456-426614174000"),
    (col("d", Kind.DECIMAL, "decimal(65,30)", precision=65, scale=30), Decimal("-1.5"), Decimal("-1.5")),
    (col("t", Kind.TIME, "time"), timedelta(days=-35, seconds=3601), "-838:59:59"),  # as CAST(t AS CHAR)
    (col("t", Kind.TIME, "time(6)", precision=6), timedelta(seconds=-1.5), "-00:00:01.500000"),
    (col("t", Kind.TIME, "time(3)", precision=3), timedelta(hours=838, microseconds=7000), "838:00:00.007"),
    (col("f", Kind.FLOAT32, "float"), 3.140000104904175, 3.140000104904175),
    # TIME(n>0): the library reads -00:00:01.10 as -00:00:01.90; whole and positive values it reads right.
    (col("t", Kind.TIME, "time(2)", precision=2), -timedelta(seconds=1, microseconds=900000), "-00:00:01.10"),
    (col("t", Kind.TIME, "time(6)", precision=6), -timedelta(hours=838, minutes=59, seconds=58, microseconds=1),
     "-838:59:58.999999"),
    (col("t", Kind.TIME, "time(6)", precision=6), -timedelta(seconds=0, microseconds=500000), "-00:00:00.500000"),
    (col("t", Kind.TIME, "time(1)", precision=1), -timedelta(hours=5), "-05:00:00.0"),
    (col("t", Kind.TIME, "time(1)", precision=1), timedelta(seconds=1, microseconds=900000), "00:00:01.9"),
])
def test_decoded_value_becomes_the_snapshot_value(column, decoded, expected):
    assert convert(column, decoded) == expected
    assert type(convert(column, decoded)) is type(expected)


def test_kinds_the_library_already_decodes_right_need_no_converter():
    for kind, native in [(Kind.INT, "int(11)"), (Kind.UINT64, "bigint(20) unsigned"), (Kind.STRING, "varchar(5)"),
                         (Kind.DECIMAL, "decimal(10,2)"), (Kind.DATETIME, "datetime(6)"), (Kind.DATE, "date"),
                         (Kind.FLOAT64, "double"), (Kind.ENUM, "enum('a')")]:
        assert converter(col("c", kind, native)) is None, kind


def test_image_normalisation_tells_an_empty_set_from_null():
    schema = TableSchema(TableId("db", "t"), (
        col("id", Kind.INT, "int(11)"), col("s", Kind.SET, "set('x','y')", values=("x", "y")),
        col("n", Kind.SET, "set('x','y')", values=("x", "y")), col("b", Kind.BIT, "bit(3)", length=3)), ("id",))
    values = {"id": 1, "s": None, "n": None, "b": "1"}
    image = normalise_image(values, {"s": "empty set", "n": "null"}, converters(schema))
    assert image == {"id": 1, "s": "", "n": None, "b": "001"}


def test_columns_missing_from_a_partial_image_are_absent_not_null():
    """binlog_row_image MINIMAL/NOBLOB: the library gives None both for NULL and for a column not logged."""
    schema = TableSchema(TableId("db", "t"), (col("id", Kind.INT, "int(11)"), col("a", Kind.BIT, "bit(3)", length=3),
                                              col("b", Kind.BINARY, "blob"), col("c", Kind.INT, "int(11)")), ("id",))
    values = {"id": 1, "a": None, "b": None, "c": None}
    image = normalise_image(values, {"a": "cols bitmap", "b": "cols bitmap", "c": "null"}, converters(schema))
    assert image == {"id": 1, "c": None}


CAPTURED = {TableId("shop", "orders"), TableId("shop", "items"), TableId("crm", "people")}


@pytest.mark.parametrize("statement, touched", [
    ("ALTER TABLE orders ADD COLUMN z INT", [TableId("shop", "orders")]),
    ("alter online ignore table `shop`.`orders` drop column z", [TableId("shop", "orders")]),
    ("ALTER TABLE IF EXISTS crm . people ADD x INT", [TableId("crm", "people")]),
    ("ALTER TABLE other ADD COLUMN z INT", []),
    ("ALTER TABLE crm.orders ADD COLUMN z INT", []),  # same name, other database
    ("CREATE TABLE items (id INT PRIMARY KEY)", [TableId("shop", "items")]),
    ("CREATE OR REPLACE TABLE IF NOT EXISTS `items` LIKE orders", [TableId("shop", "items")]),
    ("DROP TABLE IF EXISTS `orders`,`nothere`, crm.people /* generated by server */",
     [TableId("shop", "orders"), TableId("crm", "people")]),
    ("TRUNCATE TABLE orders", [TableId("shop", "orders")]),
    ("truncate shop.items", [TableId("shop", "items")]),
    ("RENAME TABLE orders TO orders_old, shop.tmp TO `items`", [TableId("shop", "orders"), TableId("shop", "items")]),
    ("/* a leading comment */ ALTER TABLE orders ENGINE=InnoDB", [TableId("shop", "orders")]),
    ("DROP DATABASE shop", [TableId("shop", "items"), TableId("shop", "orders")]),
    ("DROP SCHEMA IF EXISTS `crm`", [TableId("crm", "people")]),
    ("CREATE INDEX ix ON orders (z)", []),  # indexes do not change the rows we carry
    ("GRANT SELECT ON shop.* TO x", []),
    ("SAVEPOINT orders", []),
])
def test_ddl_names_the_captured_tables_it_touches(statement, touched):
    assert ddl_tables(statement, "shop", CAPTURED) == touched


def test_ddl_with_backticked_names_keeps_special_characters():
    captured = {TableId("my db", "we`ird")}
    assert ddl_tables("ALTER TABLE `my db`.`we``ird` ADD x INT", "other", captured) == [TableId("my db", "we`ird")]


def test_default_server_id_is_stable_distinct_and_in_range():
    ids = {default_server_id(f"task-{i}") for i in range(1000)}
    assert len(ids) == 1000
    assert all(SERVER_ID_MIN <= i < 2**31 for i in ids)
    assert default_server_id("task-1") == default_server_id("task-1")


# ---- MySQL 8 binary JSON (sql/json_binary.h): opaque scalars print as MySQL prints them ------------------------
# DECIMAL bytes: precision, scale, then decimal2bin (two digits a byte here; sign bit flipped, negatives inverted).

JSONB_SMALL_OBJECT, JSONB_SMALL_ARRAY, JSONB_INT16, JSONB_STRING, JSONB_OPAQUE = 0x00, 0x02, 0x05, 0x0C, 0x0F
MYSQL_TYPE_TIMESTAMP, MYSQL_TYPE_DATE, MYSQL_TYPE_TIME, MYSQL_TYPE_DATETIME = 7, 10, 11, 12
MYSQL_TYPE_BLOB, MYSQL_TYPE_NEWDECIMAL = 252, 246


def opaque(field_type: int, data: bytes) -> tuple[int, bytes]:
    assert len(data) < 128  # one-byte variable length
    return JSONB_OPAQUE, bytes([field_type, len(data)]) + data


def packed_datetime(y, mo, d, h=0, mi=0, s=0, us=0) -> bytes:
    """Json_datetime::to_packed of a DATE/DATETIME/TIMESTAMP: TIME_to_longlong_datetime_packed, int8store."""
    ymd, hms = ((y * 13 + mo) << 5) | d, (h << 12) | (mi << 6) | s
    return (((ymd << 17 | hms) << 24) + us).to_bytes(8, "little", signed=True)


def packed_time(negative: bool, h, mi, s, us=0) -> bytes:
    """TIME_to_longlong_time_packed: the magnitude, negated for a negative TIME."""
    value = ((((h << 12) | (mi << 6) | s)) << 24) + us
    return (-value if negative else value).to_bytes(8, "little", signed=True)


def small_container(entries: list[tuple[str | None, tuple[int, bytes]]], is_object: bool) -> bytes:
    """A small object/array: count, size, key entries, value entries, keys, values (offsets from its start)."""
    count = len(entries)
    header = 4 + count * (4 if is_object else 0) + count * 3
    keys = b"".join(k.encode() for k, _ in entries) if is_object else b""
    key_entries, value_entries, values = b"", b"", b""
    key_at, value_at = header, header + len(keys)
    for key, (jtype, payload) in entries:
        if is_object:
            key_entries += key_at.to_bytes(2, "little") + len(key.encode()).to_bytes(2, "little")
            key_at += len(key.encode())
        if jtype == JSONB_INT16:
            value_entries += bytes([jtype]) + payload
        else:
            value_entries += bytes([jtype]) + (value_at + len(values)).to_bytes(2, "little")
            values += payload
    body = key_entries + value_entries + keys + values
    return count.to_bytes(2, "little") + (4 + len(body)).to_bytes(2, "little") + body


def decode_binary_json(jtype: int, data: bytes):
    from pymysqlreplication.json_binary import parse_json  # what the library runs on a JSON column's bytes
    return parse_json(jtype, data)


def test_mysql8_json_scalars_print_as_mysql_prints_them():
    document = small_container([
        ("a", opaque(MYSQL_TYPE_NEWDECIMAL, bytes([4, 2, 0x80 | 12, 50]))),
        ("d", opaque(MYSQL_TYPE_DATE, packed_datetime(2024, 1, 2))),
        ("t", opaque(MYSQL_TYPE_TIME, packed_time(True, 838, 59, 58, 500000))),
        ("dt", opaque(MYSQL_TYPE_DATETIME, packed_datetime(2024, 2, 29, 23, 4, 5, 6))),
        ("ts", opaque(MYSQL_TYPE_TIMESTAMP, packed_datetime(2038, 1, 19, 3, 14, 7))),
        ("arr", (JSONB_SMALL_ARRAY, small_container([
            (None, opaque(MYSQL_TYPE_TIME, packed_time(False, 1, 2, 3))),
            (None, (JSONB_INT16, (7).to_bytes(2, "little"))),
            (None, (JSONB_STRING, bytes([2]) + "é".encode())),
            (None, opaque(MYSQL_TYPE_BLOB, b"\x00\xff")),
        ], is_object=False))),
    ], is_object=True)
    decoded = decode_binary_json(JSONB_SMALL_OBJECT, document)

    text = convert(col("j", Kind.JSON, "json"), decoded)

    # As `SELECT CAST(j AS CHAR)` prints it (Json_wrapper::to_string: my_TIME_to_str(t, 6) for temporal
    # scalars, decimal2string for DECIMAL, base64:typeNN: for other opaque values, ", " and ": " between).
    assert text == ('{"a": 12.50, "d": "2024-01-02", "t": "-838:59:58.500000", "dt": "2024-02-29 23:04:05.000006", '
                    '"ts": "2038-01-19 03:14:07.000000", "arr": ["01:02:03.000000", 7, "é", "base64:type252:AP8="]}')


@pytest.mark.parametrize("decimal_bytes, text", [
    (bytes([8, 7, 0x80, 0, 0, 0, 1]), "0.0000001"),  # DECIMAL(8,7): Python would print 1E-7
    (bytes([4, 0, 0x7C, 0x17]), "-1000"),  # DECIMAL(4,0): a negative value has every bit inverted
    (bytes([3, 2, 0x81, 50]), "1.50"),  # DECIMAL(3,2): the scale's trailing zero stays
])
def test_mysql8_json_decimal_prints_plain_with_its_scale(decimal_bytes, text):
    document = small_container([(None, opaque(MYSQL_TYPE_NEWDECIMAL, decimal_bytes))], is_object=False)
    assert convert(col("j", Kind.JSON, "json"), decode_binary_json(JSONB_SMALL_ARRAY, document)) == f"[{text}]"


def test_enum_and_set_labels_are_read_from_column_type_exactly():
    column_type = "set('It''s','x\\\\y','n\\nl','t\tb','nul\\0','A,B','z\\Zz')"
    assert labels(column_type) == ("It's", "x\\y", "n\nl", "t\tb", "nul\0", "A,B", "z\x1az")
    row = {"column_name": "e", "data_type": "enum", "column_type": "enum('Ab','ü')", "is_nullable": "YES",
           "character_set_name": "utf16", "collation_name": "utf16_general_ci"}
    described = column_from_catalog(row, set())
    assert (described.values, described.native, described.charset) == (("Ab", "ü"), "enum('Ab','ü')", "utf16")


def _text_row(charset: str) -> dict:
    return {"column_name": "v", "data_type": "varchar", "column_type": "varchar(5)", "is_nullable": "YES",
            "character_maximum_length": 5, "character_set_name": charset, "collation_name": f"{charset}_bin"}


@pytest.mark.parametrize("charset", ["utf16", "ucs2", "utf32", "latin1", "sjis", "utf8mb4"])
def test_text_in_a_charset_with_an_exact_codec_is_a_string(charset):
    assert column_from_catalog(_text_row(charset), set()).kind == Kind.STRING


@pytest.mark.parametrize("charset", ["big5", "ujis", "eucjpms", "swe7", "dec8", "armscii8", "hp8", "keybcs2", "geostd8"])
def test_text_in_a_charset_without_an_exact_codec_is_refused(charset):
    column = column_from_catalog(_text_row(charset), set())
    assert (column.kind, column.charset) == (Kind.UNKNOWN, charset)


class LibraryColumn:
    """The attributes of pymysqlreplication's Column that adopt() reads and sets."""

    def __init__(self, name: str, type_: int, charset: str | None, enum_values=None, set_values=None) -> None:
        self.name, self.type, self.character_set_name = name, type_, charset
        self.enum_values, self.set_values = enum_values, set_values


def test_a_table_maps_columns_take_the_described_codecs_and_labels():
    schema = TableSchema(TableId("d", "t"), (
        col("u16", Kind.STRING, "varchar(5)", charset="utf16"), col("l1", Kind.STRING, "char(5)", charset="latin1"),
        col("old", Kind.STRING, "text"), col("bin", Kind.BINARY, "varbinary(5)"),
        col("e", Kind.ENUM, "enum('A','ü')", values=("A", "ü"), charset="ucs2"),
        col("s", Kind.SET, "set('a')", values=("a",))), ("u16",))
    columns = [LibraryColumn("u16", FIELD_TYPE.VARCHAR, "utf16"), LibraryColumn("l1", FIELD_TYPE.STRING, "cp1252"),
               LibraryColumn("old", FIELD_TYPE.BLOB, "utf8"), LibraryColumn("bin", FIELD_TYPE.VARCHAR, "binary"),
               LibraryColumn("e", FIELD_TYPE.ENUM, "ucs2", enum_values=["", "a", "\x00\xfc"]),
               LibraryColumn("s", FIELD_TYPE.SET, "utf8", set_values=["A"]),
               LibraryColumn("gone", FIELD_TYPE.VARCHAR, "utf32")]
    adopt(columns, schema)
    assert [c.character_set_name for c in columns[:4]] == ["utf-16-be", "mysql_latin1", "utf8", "binary"]
    assert columns[4].enum_values == ["", "A", "ü"]
    assert columns[5].set_values == ["A"]  # a plan without the labels' charset keeps the binlog's labels
    assert columns[6].character_set_name == "latin-1"  # not carried: read past, whatever its bytes
    assert b"\x00a\x00b".decode("utf-16-be") == "ab" and b"\x81\x80".decode("mysql_latin1") == "\x81€"
