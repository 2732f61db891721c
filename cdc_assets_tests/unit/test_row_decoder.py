"""The specialised row decoder against the library's own value reader, on many generated row images: every column
type it reads, with random values (any bytes, where every byte string is a value of the type: numbers, dates and
times, bits) and valid encodings of random DECIMALs of every precision and scale. Values must come out identical,
type and representation included (repr: Decimal('1.50') is not Decimal('1.5'))."""
from __future__ import annotations

import random
from decimal import Decimal
from types import SimpleNamespace

import pytest
from pymysql.protocol import MysqlPacket
from pymysqlreplication.column import Column
from pymysqlreplication.constants import BINLOG, FIELD_TYPE
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import RowsEvent

from cdc_assets.sources.mysql.row_decoder import compile_layout
from cdc_assets.sources.mysql.zero_dates import LIBRARY_OUT_OF_RANGE, ZERO_DATE

IMAGES = 400


def column(name: str, type_: int, **meta) -> Column:
    return Column(type=type_, name=name, unsigned=meta.pop("unsigned", False),
                  character_set_name=meta.pop("charset", None), enum_values=meta.pop("enum_values", None),
                  set_values=meta.pop("set_values", None), **meta)


def library_images(columns: list[Column], data: bytes) -> list[dict]:
    """What pymysqlreplication's RowsEvent reads from `data`, a run of whole row images of `columns`."""
    wrapper = object.__new__(BinLogPacketWrapper)
    wrapper._BinLogPacketWrapper__data_buffer = b""
    wrapper.packet, wrapper.read_bytes = MysqlPacket(data, "utf8"), 0
    event = object.__new__(RowsEvent)
    event.packet, event.columns, event.table_id, event.event_type = wrapper, columns, 1, BINLOG.WRITE_ROWS_EVENT_V2
    event.table_map = {1: SimpleNamespace(columns=columns)}
    event._ignore_decode_errors = False
    present = ((1 << len(columns)) - 1).to_bytes((len(columns) + 7) // 8, "little")
    images = []
    while wrapper.read_bytes < len(data):
        event._RowsEvent__none_sources = {}
        values = event._read_column_data(present)
        # A date the library made None for want of a datetime to hold it: ZERO_DATE, as values.normalise_image says
        out_of_range = {k for k, why in event._RowsEvent__none_sources.items() if why in LIBRARY_OUT_OF_RANGE}
        images.append({k: ZERO_DATE if k in out_of_range else None if isinstance(v, set) and not v else v
                       for k, v in values.items()})
    return images


def specialised_images(columns: list[Column], data: bytes) -> list[dict]:
    layout = compile_layout(columns, frozenset(c.name for c in columns), {})
    assert layout is not None
    return layout.rows(data, 0, len(data))


def image(columns: list[Column], values: list[bytes | None]) -> bytes:
    nulls = sum(1 << i for i, v in enumerate(values) if v is None)
    return nulls.to_bytes((len(columns) + 7) // 8, "little") + b"".join(v for v in values if v is not None)


FIXED = [  # (column, width in bytes): every byte string of the width is a value
    *(column(f"i{w}{'u' if u else ''}", t, unsigned=u) for t, w in [(FIELD_TYPE.TINY, 1), (FIELD_TYPE.SHORT, 2),
      (FIELD_TYPE.INT24, 3), (FIELD_TYPE.LONG, 4), (FIELD_TYPE.LONGLONG, 8)] for u in (False, True)),
    column("f", FIELD_TYPE.FLOAT), column("d", FIELD_TYPE.DOUBLE), column("y", FIELD_TYPE.YEAR),
    column("b1", FIELD_TYPE.BIT, bits=1, bytes=1), column("b10", FIELD_TYPE.BIT, bits=10, bytes=2),
    column("b64", FIELD_TYPE.BIT, bits=64, bytes=8),
    *(column(f"dt{fsp}", FIELD_TYPE.DATETIME2, fsp=fsp) for fsp in range(7)),
    *(column(f"ts{fsp}", FIELD_TYPE.TIMESTAMP2, fsp=fsp) for fsp in range(7)),
    *(column(f"tm{fsp}", FIELD_TYPE.TIME2, fsp=fsp) for fsp in range(7)),
    column("s", FIELD_TYPE.SET, size=2, set_values=list("abcdefghij")),
]
WIDTHS = {FIELD_TYPE.TINY: 1, FIELD_TYPE.SHORT: 2, FIELD_TYPE.INT24: 3, FIELD_TYPE.LONG: 4, FIELD_TYPE.LONGLONG: 8,
          FIELD_TYPE.FLOAT: 4, FIELD_TYPE.DOUBLE: 8, FIELD_TYPE.YEAR: 1, FIELD_TYPE.SET: 2}


def width(c: Column) -> int:
    if c.type == FIELD_TYPE.BIT:
        return c.bytes
    if c.type in (FIELD_TYPE.DATETIME2, FIELD_TYPE.TIMESTAMP2, FIELD_TYPE.TIME2):
        return {FIELD_TYPE.DATETIME2: 5, FIELD_TYPE.TIMESTAMP2: 4, FIELD_TYPE.TIME2: 3}[c.type] + (c.fsp + 1) // 2
    return WIDTHS[c.type]


def plausible(c: Column, rng: random.Random) -> bytes:
    """Random bytes of the column's width; for DATETIME often a real date (random bytes are mostly invalid dates,
    which both read as None), and a fraction of the precision's digits (as the server writes: beyond them the
    library fails)."""
    raw = bytearray(rng.randbytes(width(c)))
    if c.type == FIELD_TYPE.DATETIME2 and rng.random() < 0.7:
        packed = 1 << 39 | (rng.randrange(1000, 10000) * 13 + rng.randrange(1, 13)) << 22 | rng.randrange(1, 29) << 17 \
            | rng.randrange(24) << 12 | rng.randrange(60) << 6 | rng.randrange(60)
        raw[:5] = packed.to_bytes(5, "big")
    if c.type in (FIELD_TYPE.DATETIME2, FIELD_TYPE.TIMESTAMP2) and c.fsp:  # a fraction of fsp digits, always
        digits = rng.randrange(10 ** c.fsp) * (10 if c.fsp % 2 else 1)  # an odd fsp stores one digit more
        raw[-((c.fsp + 1) // 2):] = digits.to_bytes((c.fsp + 1) // 2, "big")
    if c.type == FIELD_TYPE.TIMESTAMP2:
        raw[0] &= 0x7F  # seconds since 1970 (a negative TIMESTAMP does not exist)
    return bytes(raw)


def test_fixed_width_kinds_read_as_the_library_reads_them():
    rng = random.Random(11)
    rows = [[None if rng.random() < 0.1 else plausible(c, rng) for c in FIXED] for _ in range(IMAGES)]
    data = b"".join(image(FIXED, r) for r in rows)
    ours, theirs = specialised_images(FIXED, data), library_images(FIXED, data)
    assert len(ours) == IMAGES and any(v is not None for v in ours[0].values())
    assert [repr(i) for i in ours] == [repr(i) for i in theirs]


def decimal_bytes(precision: int, scale: int, value: str) -> bytes:
    """MySQL's binary DECIMAL (strings/decimal.cc decimal2bin) of `value`, '[-]digits.digits' fitting the type."""
    negative, value = value.startswith("-"), value.lstrip("-")
    whole, _, fraction = value.partition(".")
    whole, fraction = whole.rjust(precision - scale, "0"), fraction.ljust(scale, "0")
    dig2bytes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    lead = len(whole) % 9
    parts = [whole[:lead]] * bool(lead) + [whole[i:i + 9] for i in range(lead, len(whole), 9)]
    tail = [fraction[i:i + 9] for i in range(0, len(fraction), 9)]
    raw = bytearray(b"".join(int(p).to_bytes(dig2bytes[len(p)], "big") for p in parts + tail))
    if negative:
        raw = bytearray(b ^ 0xFF for b in raw)
    raw[0] ^= 0x80
    return bytes(raw)


@pytest.mark.parametrize("precision", [1, 2, 4, 8, 9, 10, 12, 17, 18, 19, 27, 28, 29, 38, 47, 64, 65])
def test_decimals_of_every_shape_read_as_the_library_reads_them(precision):
    rng = random.Random(precision)
    columns = [column(f"d{s}", FIELD_TYPE.NEWDECIMAL, precision=precision, decimals=s)
               for s in sorted({0, 1, precision // 2, min(precision, 30), min(precision, 9), min(precision, 10)})]
    rows = []
    for _ in range(IMAGES // 4):
        row = []
        for c in columns:
            digits = "".join(rng.choice("0123456789") for _ in range(rng.choice([1, c.precision])))[-c.precision:]
            digits = digits.rjust(c.precision, "0")
            cut = c.precision - c.decimals
            text = f"{'-' if rng.random() < 0.5 else ''}{digits[:cut]}.{digits[cut:]}"
            row.append(decimal_bytes(c.precision, c.decimals, text))
        rows.append(row)
    data = b"".join(image(columns, r) for r in rows)
    ours, theirs = specialised_images(columns, data), library_images(columns, data)
    assert all(isinstance(v, Decimal) for v in ours[0].values())
    assert [repr(i) for i in ours] == [repr(i) for i in theirs]


@pytest.mark.parametrize("charset, values", [
    ("utf8", ["", "a", "ünïcode 🚀", "x" * 300]), ("cp1252", ["", "façade"]), ("binary", ["", "\x00\xff"]),
    ("swe7", ["", "abc"]),  # a charset Python has no codec for: the bytes as they are, '' when empty
])
def test_strings_read_as_the_library_reads_them(charset, values):
    columns = [column("v1", FIELD_TYPE.VARCHAR, max_length=255, charset=charset),
               column("v2", FIELD_TYPE.VARCHAR, max_length=1200, charset=charset),
               column("s", FIELD_TYPE.STRING, max_length=40, charset=charset),
               *(column(f"b{n}", FIELD_TYPE.BLOB, length_size=n, charset=charset) for n in (1, 2, 3, 4)),
               column("g", FIELD_TYPE.GEOMETRY, length_size=4),
               column("e", FIELD_TYPE.ENUM, size=1, enum_values=["", "x", "y"])]
    encoding = "latin-1" if charset in ("binary", "swe7") else charset
    rows = []
    for i, text in enumerate(values):
        raw = text.encode(encoding)[:255]
        lengths = [1, 2, 1, 1, 2, 3, 4, 4]
        rows.append([len(raw).to_bytes(n, "little") + raw for n in lengths] + [(i % 3).to_bytes(1, "little")])
    data = b"".join(image(columns, r) for r in rows)
    assert [repr(i) for i in specialised_images(columns, data)] == [repr(i) for i in library_images(columns, data)]


def test_a_row_run_that_does_not_end_where_the_event_ends_is_refused():
    columns = [column("i", FIELD_TYPE.LONG)]
    data = image(columns, [b"\x01\x00\x00\x00"]) * 2
    layout = compile_layout(columns, frozenset({"i"}), {})
    assert layout.rows(data, 0, len(data)) == [{"i": 1}, {"i": 1}]
    assert layout.rows(data, 0, len(data) - 1) is None  # the caller then reads the event the library's way
