"""MySQL's zero dates in the log: refused, as the snapshot refuses them.

A session without NO_ZERO_DATE/NO_ZERO_IN_DATE (e.g. `SET SESSION sql_mode=''`) stores dates no calendar has:
`0000-00-00`, a zero month or day (`2020-00-15`, `2021-02-00`), zero DATETIMEs and TIMESTAMPs (TIMESTAMP's zero is
epoch second 0, which no real TIMESTAMP holds: its range starts at 1970-01-01 00:00:01 UTC), and, with
ALLOW_INVALID_DATES, days past the month's end (`2021-02-30`). Neither target can hold them (PostgreSQL has no such
dates, and the MySQL sessions the task opens are strict), the snapshot stops on them, and NULL is another value: so
the log stops too, naming table, column, key and position.

The decoders (row_decoder.py, and values.normalise_image after the library) hand such a value on as `ZERO_DATE`;
`ZeroDates.check` decides, per row image. An after image (an insert's, an update's) with one stops the read. A
before image (an update's or a delete's) is read for its key alone: a zero date in its key stops too; elsewhere it
becomes None, since no apply reads it (`core.batches.old_key`), and a row may well be fixed by an update whose
before image holds the bad date.
"""
from __future__ import annotations

from datetime import date

from pymysqlreplication.constants import NONE_SOURCE

from cdc_assets.core.tables import Kind, TableSchema
from cdc_assets.errors import REPLAN_HINT, CdcError


class _ZeroDate:
    """The one value standing for every date no calendar holds."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ZERO_DATE"


ZERO_DATE = _ZeroDate()
TEMPORAL = (Kind.DATE, Kind.DATETIME, Kind.TIMESTAMP)
# What pymysqlreplication says of a DATE, DATETIME or DATETIME2 it made None for want of a datetime to hold it.
LIBRARY_OUT_OF_RANGE = frozenset({NONE_SOURCE.OUT_OF_DATE_RANGE, NONE_SOURCE.OUT_OF_DATETIME_RANGE,
                                  NONE_SOURCE.OUT_OF_DATETIME2_RANGE})
ZERO_DATE_HINT = ("zero dates are not supported (the snapshot refuses them too): set the value to NULL or a real "
                  "date on the source, make the writing sessions strict (sql_mode with NO_ZERO_DATE, NO_ZERO_IN_DATE "
                  "and STRICT_TRANS_TABLES), then " + REPLAN_HINT + "; or leave the column out with "
                  "source.exclude_columns")


class ZeroDateError(CdcError):
    """A row change of the log carries a date no calendar holds."""


def date_or_zero(year: int, month: int, day: int):
    """DATE's parts as a date, or ZERO_DATE for a zero part or a day past the month's end."""
    try:
        return date(year, month, day) if year and month and day else ZERO_DATE
    except ValueError:
        return ZERO_DATE


class ZeroDates:
    """The date columns of one captured table, and the check of its row images."""

    def __init__(self, schema: TableSchema) -> None:
        self.table = schema.table
        self.key = schema.primary_key
        self.names = tuple(c.name for c in schema.columns if c.kind in TEMPORAL)

    def check(self, image: dict, key: tuple, position, where: str, before: bool = False) -> dict:
        """`image` with its zero dates dealt with (in place): raises ZeroDateError for one in an after image or in
        a before image's key; a before image's others become None."""
        for name in self.names:
            if image.get(name) is ZERO_DATE:
                if before and name not in self.key:
                    image[name] = None
                    continue
                what = "key column" if name in self.key else "column"
                raise ZeroDateError(
                    f"a zero or invalid date in {what} {name} of {self.table}, key {key}, at {position} in the "
                    f"binlog of {where}: neither target can hold it, and NULL would be another value", ZERO_DATE_HINT)
        return image
