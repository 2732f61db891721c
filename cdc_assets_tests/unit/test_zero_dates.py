"""MySQL zero dates in row images: an after image or a key with one stops, naming table, column, key and position;
a before image's other columns give it up as None."""
from datetime import date

import pytest

from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.sources.mysql.zero_dates import ZERO_DATE, ZeroDateError, ZeroDates, date_or_zero

SCHEMA = TableSchema(TableId("shop", "t"), (Column("d", Kind.DATE, "date"), Column("id", Kind.INT, "int"),
                                            Column("at", Kind.DATETIME, "datetime"), Column("n", Kind.INT, "int")),
                     ("d", "id"))
AT = MysqlPosition("mysql-bin.000003", 4663)


@pytest.mark.parametrize("parts, want", [((2024, 2, 29), date(2024, 2, 29)), ((0, 0, 0), ZERO_DATE),
                                         ((2020, 0, 15), ZERO_DATE), ((2021, 2, 0), ZERO_DATE),
                                         ((2021, 2, 30), ZERO_DATE)])  # ALLOW_INVALID_DATES
def test_date_parts_no_calendar_holds_are_the_zero_date(parts, want):
    assert date_or_zero(*parts) == want


def test_an_after_image_with_a_zero_date_stops_naming_table_column_key_and_position():
    with pytest.raises(ZeroDateError, match=r"column at of shop\.t, key \(datetime.date\(2020, 1, 1\), 7\), at "
                                            r"mysql-bin\.000003:4663 in the binlog of src.*plan --replan"):
        ZeroDates(SCHEMA).check({"d": date(2020, 1, 1), "id": 7, "at": ZERO_DATE, "n": 1}, (date(2020, 1, 1), 7),
                                AT, "src")


def test_a_before_image_gives_up_a_zero_date_outside_its_key():
    image = {"d": date(2020, 1, 1), "id": 7, "at": ZERO_DATE, "n": 1}
    assert ZeroDates(SCHEMA).check(image, (date(2020, 1, 1), 7), AT, "src", before=True) == {
        "d": date(2020, 1, 1), "id": 7, "at": None, "n": 1}


def test_a_before_image_with_a_zero_date_in_its_key_stops():
    with pytest.raises(ZeroDateError, match=r"key column d of shop\.t, key \(ZERO_DATE, 7\)"):
        ZeroDates(SCHEMA).check({"d": ZERO_DATE, "id": 7, "at": None, "n": 1}, (ZERO_DATE, 7), AT, "src", before=True)
