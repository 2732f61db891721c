"""COPY text of log values (sinks/copy_rows.py) against a real PostgreSQL: each value, copied into a text column and
cast to the column's type, must read back as the VALUES path's `CAST(%s AS type)` of the same value reads. Each
case's values are one column: a column of one type renders through a builtin, a mixed one value by value."""
import datetime as dt
import io
from decimal import Decimal

import pytest

from cdc_assets.sinks import postgres_values
from cdc_assets.sinks.copy_rows import NotCopied, column_renderer, copy_lines

UTC, EAST = dt.timezone.utc, dt.timezone(dt.timedelta(hours=5, minutes=30))
TEXTS = ["", "plain", "tab\there", "new\nline", "cr\rreturn", "back\\slash", "\\N", "\\x41", 'quo"te', "NULL",
         "{1,2}", "emoji 🚀 ünï", " lead and trail "]
CASES = [  # (column type, values)
    ("text", TEXTS),
    ("varchar(5)", ["abcdefgh", "ab"]),
    ("bigint", [0, -9223372036854775808, 9223372036854775807]),
    ("smallint", [-32768, "12"]),
    ("numeric", [Decimal("12345678901234567890.123456789"), Decimal("-0.000"), Decimal("1E+3"), Decimal("NaN"),
                 Decimal("Infinity"), Decimal("-Infinity"), 7]),
    ("numeric(12,2)", [Decimal("1.005"), Decimal("-12.5")]),
    ("numeric", [Decimal("NaN"), Decimal("-Infinity"), Decimal("2.50")]),  # a column of Decimals only
    ("bigint", [1, None, 2]),
    ("double precision", [0.1, -0.0, float("inf"), float("-inf"), float("nan"), 1e300]),
    ("real", ["3.4028235e+38", "-0.0", "inf", "nan"]),
    ("double precision", ["5e-324", "-0.0", "-inf", "0.1"]),
    ("boolean", [True, False, 0, 1, 2, "t", "false"]),
    ("bytea", [b"", b"\x00\xff\\\n\t", bytearray(b"ab"), memoryview(b"\x01")]),
    ("date", [dt.date(1, 1, 1), dt.date(9999, 12, 31), "infinity"]),
    ("timestamp(6)", [dt.datetime(2000, 2, 29, 12, 0, 0, 500000), dt.datetime(1970, 1, 1), "-infinity"]),
    ("timestamptz(6)", [dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC),
                        dt.datetime(2000, 2, 29, 12, 0, tzinfo=EAST), dt.datetime(2024, 6, 1, 12, 30)]),
    ("time(6)", [dt.time(23, 59, 59, 999999), dt.time(0, 0), "24:00:00"]),
    ("timetz", [dt.time(1, 2, 3, 4, tzinfo=EAST)]),
    ("interval", [dt.timedelta(days=-1, seconds=5, microseconds=7), dt.timedelta(0), "838:59:59.000000",
                  "1 year 2 mons"]),
    ("jsonb", ['{"a": [1, "t\\tb"]}', "null"]),
    ("bit(10)", ["1010101010"]),
    ("integer[]", [[1, None, 3], [], [[1, 2], [3, 4]]]),
    ("text[]", [TEXTS + [None], ["a,b", "{x}", ""]]),
    ("boolean[]", [[True, False, None]]),
    ("numeric[]", [[Decimal("1.5"), Decimal("NaN")]]),
    ("date[]", [[dt.date(2024, 2, 29), "infinity"]]),
    ("timestamptz[]", [[dt.datetime(2000, 2, 29, 10, 0, 0, 500000, tzinfo=UTC), None]]),
    ("bytea[]", [[b"\x00\\", b""]]),
]


@pytest.fixture
def pg(servers):
    conn = servers.postgres.connect()
    with conn.cursor() as cur:
        cur.execute("SET TIME ZONE 'America/New_York'")  # a naive timestamp cast to timestamptz takes this zone
    yield conn
    conn.close()


def through_copy(conn, type_sql: str, values: list) -> list[str | None]:
    data = copy_lines([(i, v) for i, v in enumerate(values)], [column_renderer("integer"), column_renderer(type_sql)])
    with conn.cursor() as cur:
        cur.execute("CREATE TEMPORARY TABLE copied (i text, v text)")
        try:
            cur.copy_expert("COPY copied FROM STDIN", io.BytesIO(data))
            cur.execute(f"SELECT CAST(v AS {type_sql})::text FROM copied ORDER BY CAST(i AS integer)")
            return [r[0] for r in cur.fetchall()]
        finally:
            cur.execute("DROP TABLE copied")


def through_values(conn, type_sql: str, values: list) -> list[str | None]:
    """As the sink's VALUES statements cast each value, passed as it passes it."""
    with conn.cursor() as cur:
        texts = []
        for value in values:
            cur.execute(f"SELECT CAST(%s AS {type_sql})::text", (postgres_values.param(value),))
            texts.append(cur.fetchone()[0])
        return texts


@pytest.mark.parametrize("type_sql, values", CASES, ids=[c[0] for c in CASES])
def test_copy_text_reads_back_as_the_values_statement_does(pg, type_sql, values):
    values = [*values, None]
    assert through_copy(pg, type_sql, values) == through_values(pg, type_sql, values)


def test_a_string_keeps_every_character():
    line = copy_lines([("a\tb\\c\nd\re",)], [column_renderer("text")])
    assert line == b"a\\tb\\\\c\\nd\\re\n"


@pytest.mark.parametrize("type_sql, value", [("bit(8)", 5), ("integer", True), ("text", object()),
                                             ("text[]", [{"a": 1}])])
def test_values_whose_text_would_mean_something_else_are_refused(type_sql, value):
    with pytest.raises(NotCopied):
        copy_lines([(value,)], [column_renderer(type_sql)])


def test_a_conversion_before_rendering_is_applied_once():
    """MySQL geometry goes through the sink's conversion (SRID prefix dropped) first: once, value by value or by
    column."""
    render = column_renderer("bytea", before=lambda value: None if value is None else value[4:])
    assert render(b"\x00\x00\x00\x00ab") == "\\\\x6162"
    assert copy_lines([(b"\x00\x00\x00\x00ab",), (None,), (b"SRIDcd",)], [render]) == b"\\\\x6162\n\\N\n\\\\x6364\n"
