"""Row digests compare values, not their spelling: the same logical row read through PyMySQL from MySQL and
through psycopg2 from PostgreSQL (each value in the form that driver returns it) has one digest; any change of
a value changes it."""
import datetime as dt
import json
import struct
import uuid
from decimal import Decimal

from cdc_assets.core.row_digest import NULL, canonical, compare, digest, key_text
from cdc_assets.core.tables import Kind

KINDS = [Kind.INT, Kind.DECIMAL, Kind.TIMESTAMP, Kind.BIT, Kind.JSON, Kind.TIME, Kind.BINARY, Kind.UUID, Kind.BOOL,
         Kind.STRING, Kind.FLOAT32]
# MySQL/MariaDB through PyMySQL (UTC session): DECIMAL(10,2), TIMESTAMP naive UTC, BIT(4) as bytes, JSON as text,
# TIME as timedelta, BLOB bytes, UUID as CHAR(36) text, TINYINT(1), FLOAT as the server prints it.
MYSQL_ROW = (7, Decimal("1.50"), dt.datetime(2026, 1, 2, 3, 4, 5, 678000), b"\x05", '{"b": [1, 2], "a": 1}',
             dt.timedelta(hours=1, minutes=2, seconds=3), b"\x00\xff", "6F9619FF-8B86-D011-B42D-00C04FC964FF", 1,
             "héllo", 1.1)
# The same row in PostgreSQL through psycopg2: numeric(65,30) from a widened scale, timestamptz aware, bit as a
# bit string, jsonb parsed, time, bytea as memoryview, uuid, smallint, real.
POSTGRES_ROW = (7, Decimal("1.500000000000000000000000000000"),
                dt.datetime(2026, 1, 2, 4, 4, 5, 678000, tzinfo=dt.timezone(dt.timedelta(hours=1))), "0101",
                {"a": 1, "b": [1, 2]}, dt.time(1, 2, 3), memoryview(b"\x00\xff"),
                uuid.UUID("6f9619ff-8b86-d011-b42d-00c04fc964ff"), True, "héllo", 1.100000023841858)


def test_the_same_row_from_both_engines_has_one_digest():
    assert digest(MYSQL_ROW, KINDS) == digest(POSTGRES_ROW, KINDS)


def test_every_changed_value_changes_the_digest():
    changed = [Decimal("1.51"), dt.datetime(2026, 1, 2, 3, 4, 5, 679000), b"\x04", '{"a": 2, "b": [1, 2]}',
               dt.timedelta(hours=1, minutes=2, seconds=4), b"\x00\xfe", "6f9619ff-8b86-d011-b42d-00c04fc964fe", 0,
               "hello", 1.2]
    base = digest(MYSQL_ROW, KINDS)
    for i, value in enumerate(changed, start=1):
        row = MYSQL_ROW[:i] + (value,) + MYSQL_ROW[i + 1:]
        assert digest(row, KINDS) != base, KINDS[i]


def test_null_is_not_the_text_of_a_value():
    assert canonical(None, Kind.STRING) == NULL
    assert canonical("\\N", Kind.STRING) != NULL and canonical("", Kind.STRING) != NULL


def test_compare_names_missing_extra_and_changed_keys():
    source = {key_text([1], [Kind.INT]): "a", key_text([2], [Kind.INT]): "b", key_text([3], [Kind.INT]): "c"}
    target = {key_text([2], [Kind.INT]): "b", key_text([3], [Kind.INT]): "x", key_text([4], [Kind.INT]): "d"}
    diff = compare(source, target)
    assert (diff.missing, diff.extra, diff.changed) == (["1"], ["4"], ["3"])
    assert not diff.equal
    assert diff.summary() == ("source 3 rows, target 3: missing in the target 1 (1), extra in the target 1 (4), "
                              "different 1 (3)")
    assert compare(source, dict(source)).equal


def _next_single(value: float) -> float:
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return struct.unpack("<f", struct.pack("<I", bits + 1))[0]


# A FLOAT/real value as the MySQL side reads it (CAST AS DOUBLE: the single held exactly) and as psycopg2 parses
# PostgreSQL's shortest text of the same single.
SINGLES = [(1.100000023841858, 1.1), (3.4028234663852886e38, 3.4028235e38), (16777216.0, 16777216.0),
           (-1.1754943508222875e-38, -1.1754944e-38), (-0.0, -0.0)]


def test_a_single_read_exactly_or_as_its_shortest_text_is_one_value():
    for exact, text in SINGLES:
        assert canonical(exact, Kind.FLOAT32) == canonical(text, Kind.FLOAT32), exact


def test_the_next_single_and_special_values_are_told_apart():
    for exact, _ in SINGLES:
        assert canonical(_next_single(exact), Kind.FLOAT32) != canonical(exact, Kind.FLOAT32), exact
    specials = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 3.5e38]
    for kind in (Kind.FLOAT32, Kind.FLOAT64):
        texts = [canonical(v, kind) for v in specials]
        assert len(set(texts)) == len(specials), texts
        assert canonical(float("nan"), kind) == canonical(float("nan"), kind)


# A PostgreSQL source's text of a value (as its snapshot renders it for a MySQL target) and the value PyMySQL
# reads back from the MySQL column the type mapping gives it.
AS_TEXT_INTO_MYSQL = [
    (Kind.TIME, "24:00:00", dt.timedelta(hours=24)), (Kind.TIME, "00:00:00", dt.timedelta(0)),
    (Kind.TIME, "23:59:59.999999", dt.timedelta(hours=23, minutes=59, seconds=59, microseconds=999999)),
    (Kind.TIME, "12:00:00.5", dt.timedelta(hours=12, microseconds=500000)),
    (Kind.TIME, "-838:59:59", -dt.timedelta(hours=838, minutes=59, seconds=59)),
    (Kind.DATETIME, "2024-02-29 12:00:00.5", dt.datetime(2024, 2, 29, 12, 0, 0, 500000)),
    (Kind.DATETIME, "9999-12-31 23:59:59.999", dt.datetime(9999, 12, 31, 23, 59, 59, 999000)),
    (Kind.DATETIME, "1000-01-01 00:00:00", dt.datetime(1000, 1, 1)),
    (Kind.TIMESTAMP, "2038-01-19 03:14:08.000000", dt.datetime(2038, 1, 19, 3, 14, 8)),
    (Kind.DATE, "2024-02-29", dt.date(2024, 2, 29)),
    (Kind.DECIMAL, "1.5", Decimal("1.500000000000000000000000000000")),
    (Kind.DECIMAL, "-0.000001", Decimal("-0.000001000000000000000000000000")),
]


def test_a_value_as_text_equals_the_typed_value_it_lands_as():
    for kind, text, value in AS_TEXT_INTO_MYSQL:
        assert canonical(text, kind) == canonical(value, kind), (kind, text)


def test_a_value_as_text_differs_from_any_other_value():
    others = {Kind.TIME: dt.timedelta(microseconds=1), Kind.DATETIME: dt.timedelta(microseconds=1),
              Kind.TIMESTAMP: dt.timedelta(microseconds=1), Kind.DATE: dt.timedelta(days=1),
              Kind.DECIMAL: Decimal("0.000001")}
    for kind, text, value in AS_TEXT_INTO_MYSQL:
        assert canonical(text, kind) != canonical(value + others[kind], kind), (kind, text)
    assert canonical("-00:00:01.5", Kind.TIME) != canonical(dt.timedelta(seconds=1.5), Kind.TIME)


def test_text_that_is_no_value_of_its_kind_stays_text():
    assert canonical("infinity", Kind.TIMESTAMP) == '"infinity"'
    assert canonical("1 day 02:00:00", Kind.TIME) == '"1 day 02:00:00"'
    assert canonical("0000-00-00", Kind.DATE) == '"0000-00-00"'
    assert canonical("NaN", Kind.DECIMAL) == "NaN"


# JSON as both range reads hand it over: its text, MySQL's (or MariaDB's literal) spelling against jsonb's.
EQUAL_JSON = [('{"b": [1, 2], "a": 1}', '{"a": 1, "b": [1, 2]}'), ("1.5e3", "1500"), ("1500.0", "1500"),
              ('"\\u00e9\\ud83d\\ude80"', '"é🚀"'), ("-0.0", "0"), ("[1E+2, 0.10]", "[100, 0.1]"),
              ('{"k": {"z": null, "a": true}}', '{"k":{"a":true,"z":null}}'), ('""', '""'), ("[]", " [ ] ")]
APART_JSON = ['""', '"null"', "null", '"1"', "1", "true", '"true"', "[]", "{}", '[""]', "1.5", "18446744073709551615",
              "18446744073709551616", '{"a": 1}', '{"a": "1"}', '"{}"']


def test_json_equal_as_json_is_one_text_whoever_spelled_it():
    for mysql, postgres in EQUAL_JSON:
        assert canonical(mysql, Kind.JSON) == canonical(postgres, Kind.JSON), (mysql, postgres)
    assert canonical(b'{"a": 0.1}', Kind.JSON) == canonical({"a": 0.1}, Kind.JSON) == canonical('{"a":0.1}', Kind.JSON)


def test_json_values_that_differ_are_told_apart_and_sql_null_from_json_null():
    texts = [canonical(v, Kind.JSON) for v in APART_JSON] + [canonical(None, Kind.JSON)]
    assert len(set(texts)) == len(texts), texts


def test_a_text_that_is_not_json_is_compared_as_text_without_failing():
    broken = ["", "{a", "'x'", "[1,", "\x00"]
    texts = [canonical(v, Kind.JSON) for v in broken] + [canonical(b"\xff", Kind.JSON)]
    assert len(set(texts)) == len(texts) and canonical("{a", Kind.JSON) == canonical("{a", Kind.JSON)
    assert canonical("{a", Kind.JSON) != canonical('"{a"', Kind.JSON)
    assert canonical("", Kind.JSON) not in (canonical('""', Kind.JSON), NULL)


def test_an_array_as_psycopg2_parses_it_equals_its_json_text():
    assert canonical([1, None, -2147483648], Kind.ARRAY) == canonical("[1,null,-2147483648]", Kind.ARRAY)
    assert canonical([memoryview(b"\x00\xff")], Kind.ARRAY) == canonical('["\\\\x00ff"]', Kind.ARRAY)
    assert canonical([1000000.0], Kind.ARRAY) == canonical("[1e+06]", Kind.ARRAY)
    assert canonical([1, 2], Kind.ARRAY) != canonical([1, None], Kind.ARRAY) != canonical("[]", Kind.ARRAY)


def test_a_value_its_kind_cannot_read_is_compared_as_given_without_failing():
    assert canonical("12", Kind.BIT) != canonical("10", Kind.BIT) != canonical(2, Kind.BIT)
    assert canonical("not bits", Kind.BIT) == canonical("not bits", Kind.BIT) != canonical("other", Kind.BIT)


def test_decimals_and_json_numbers_past_28_digits_are_told_apart():
    wide = "12345678901234567890123456789012.123456789012345678901234567890"  # DECIMAL(65,30)
    other = wide[:-1] + "1"
    assert canonical(Decimal(wide), Kind.DECIMAL) != canonical(Decimal(other), Kind.DECIMAL)
    assert canonical(Decimal(wide), Kind.DECIMAL) == canonical(Decimal(wide + "000"), Kind.DECIMAL)
    assert canonical(f"[{wide}]", Kind.JSON) != canonical(f"[{other}]", Kind.JSON)
    assert canonical(f"[{wide}]", Kind.JSON) == canonical(f"[{wide}00]", Kind.JSON)


def test_a_json_string_holding_a_lone_surrogate_digests():
    assert digest(['"\\ud800"'], [Kind.JSON]) != digest(['"\\ud801"'], [Kind.JSON])


def test_text_and_integers_render_as_json_quoted_text_and_decimal_digits_in_every_kind_that_takes_them_as_is():
    # The common values take a short path: it must render what the general rules do.
    texts = ["plain", 'a "quoted" \\ back', "tab\tnew\nline\x00nul\x1f", "ünï 中文 😀", "\ud800 lone", ""]
    for kind in (Kind.STRING, Kind.BINARY, Kind.ENUM, Kind.SET, Kind.INT, Kind.OTHER):
        for text in texts:
            assert canonical(text, kind) == json.dumps(text, ensure_ascii=False), (kind, text)
    assert canonical("ABC-Def", Kind.UUID) == '"abc-def"'
    assert canonical("101", Kind.BIT) == "5" and canonical("1.50", Kind.DECIMAL) == "1.5"
    for kind in (Kind.INT, Kind.UINT64, Kind.DECIMAL, Kind.FLOAT64, Kind.STRING):
        assert [canonical(v, kind) for v in (0, -7, 2**64 + 1)] == ["0", "-7", str(2**64 + 1)]
    assert canonical(True, Kind.INT) == "1" and canonical(1, Kind.BIT) == "1" and canonical(5, Kind.JSON) == "5"
