"""What a target column holds (from information_schema.columns) against source columns and log values."""
import datetime as dt
from decimal import Decimal

import pytest

from cdc_assets.core.fits import Family, capacity, fits, holds
from cdc_assets.core.tables import Column, Kind

VARCHAR10 = capacity("character varying", 10, None, None, None)
NUMERIC_10_2 = capacity("numeric", None, 10, 2, None)
INTEGER = capacity("integer", None, 32, 0, None)
TIMESTAMP0 = capacity("timestamp without time zone", None, None, None, 0)
MYSQL_UTINY = capacity("tinyint", None, 3, 0, None, "tinyint(3) unsigned")


@pytest.mark.parametrize("cap, value, expected", [
    (VARCHAR10, "x" * 10, True), (VARCHAR10, "x" * 11, False), (VARCHAR10, "é" * 10, True),
    (NUMERIC_10_2, Decimal("12.34"), True), (NUMERIC_10_2, Decimal("12.340"), True),
    (NUMERIC_10_2, Decimal("12.345"), False), (NUMERIC_10_2, Decimal("99999999.99"), True),
    (NUMERIC_10_2, Decimal("100000000"), False), (NUMERIC_10_2, 7, True), (NUMERIC_10_2, "12.3", True),
    (NUMERIC_10_2, "12.301", False), (NUMERIC_10_2, Decimal("NaN"), True),  # the server's own error, if any
    (INTEGER, 12, True), (INTEGER, 2 ** 31, False), (INTEGER, Decimal("12.00"), True),
    (INTEGER, Decimal("12.34"), False), (INTEGER, 1.5, False), (INTEGER, "12", True),
    (MYSQL_UTINY, 255, True), (MYSQL_UTINY, -1, False),
    (TIMESTAMP0, dt.datetime(2024, 1, 1, 0, 0, 1), True), (TIMESTAMP0, dt.datetime(2024, 1, 1, 0, 0, 1, 5), False),
    (TIMESTAMP0, "2024-01-01 00:00:01.000", True), (TIMESTAMP0, "2024-01-01 00:00:01.5+00", False),
    (TIMESTAMP0, dt.timedelta(seconds=1, microseconds=1), False),
    (capacity("bit", 4, None, None, None), "1010", True), (capacity("bit", 4, None, None, None), 16, False),
    (capacity("jsonb", None, None, None, None), "x" * 1000, True),
    (VARCHAR10, None, True),
])
def test_a_value_fits_only_when_stored_unchanged(cap, value, expected):
    assert fits(cap, value) is expected


def column(kind: Kind, **kw) -> Column:
    return Column("c", kind, "native", **kw)


@pytest.mark.parametrize("cap, source, expected", [
    (VARCHAR10, column(Kind.STRING, length=10), True), (VARCHAR10, column(Kind.STRING, length=100), False),
    (VARCHAR10, column(Kind.STRING), False), (capacity("text", None, None, None, None), column(Kind.STRING), True),
    (NUMERIC_10_2, column(Kind.DECIMAL, precision=10, scale=2), True),
    (NUMERIC_10_2, column(Kind.DECIMAL, precision=10, scale=3), False),
    (NUMERIC_10_2, column(Kind.DECIMAL, precision=11, scale=2), False),
    (NUMERIC_10_2, column(Kind.INT, bits=16), True), (NUMERIC_10_2, column(Kind.INT, bits=32), False),
    (INTEGER, column(Kind.INT, bits=32), True), (INTEGER, column(Kind.INT, bits=32, unsigned=True), False),
    (INTEGER, column(Kind.DECIMAL, precision=10, scale=2), False),
    (TIMESTAMP0, column(Kind.DATETIME, precision=0), True), (TIMESTAMP0, column(Kind.DATETIME, precision=3), False),
    (capacity("numeric", None, None, None, None), column(Kind.DECIMAL), True),
    (capacity("numeric", None, 20, 0, None), column(Kind.UINT64, bits=64, unsigned=True), True),  # BIGINT UNSIGNED
    (capacity("smallint", None, 16, 0, None), column(Kind.YEAR), True),
])
def test_a_target_column_holds_a_source_column_when_every_value_fits(cap, source, expected):
    assert holds(cap, source) is expected


def test_types_the_server_checks_alone_are_other():
    assert capacity("double precision", None, 53, None, None).family is Family.OTHER
    assert capacity("longtext", 4294967295, None, None, None, "longtext").family is Family.OTHER
