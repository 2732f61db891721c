"""A row decoder specialised to a captured table's column layout: the row images of a rows event straight from its
bytes to the values `values.normalise_image` would make of what pymysqlreplication decodes, several times faster.

Why: the library decodes a value through a chain of generic calls (type dispatch, charset lookup, a wrapper read
per field), ~6 us a value, which made decoding most of the log phase's cost. Here, per layout (the TABLE_MAP's
column types and metadata, and the described columns), one Python function is generated that reads each column
with the fewest operations, applies the column's converter (values.converter) and builds the image dict. Every
read mirrors the library's (row_event.py `__read_values_name` and its helpers) so that values stay identical,
including its quirks that values.py corrects afterwards (TIME2's negative fractions, empty SETs, zero dates).

Wire format of a row image (MySQL internals manual, "Rows Event"; sql/rpl_record.cc unpack_row):

    null bitmap   (number of columns present + 7) / 8 bytes, bit i set = i-th present column is NULL
    values        each non-NULL present column in table order, in its type's binary form

Only the common case is taken: every column present in the image (binlog_row_image=FULL), a layout of types this
module reads, and not a PARTIAL_UPDATE_ROWS_EVENT. Anything else (MINIMAL/NOBLOB images, MySQL's binary JSON,
the pre-5.6 temporal types) goes the library's way, as does an event whose rows do not end exactly where the
event ends (a guard against decoding a layout wrongly: then nothing of the fast decode is used).
"""
from __future__ import annotations

import codecs
import struct
from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.row_event import RowsEvent, UpdateRowsEvent

from cdc_assets.sources.mysql import charsets
from cdc_assets.sources.mysql.zero_dates import ZERO_DATE, date_or_zero

Decoded = Callable[[bytes, int, int], list]

# type -> struct format of a fixed-width little-endian number (FIELD_TYPE.* as in the TABLE_MAP's column types)
_NUMBERS = {(FIELD_TYPE.TINY, False): "b", (FIELD_TYPE.TINY, True): "B", (FIELD_TYPE.SHORT, False): "h",
            (FIELD_TYPE.SHORT, True): "H", (FIELD_TYPE.LONG, False): "i", (FIELD_TYPE.LONG, True): "I",
            (FIELD_TYPE.LONGLONG, False): "q", (FIELD_TYPE.LONGLONG, True): "Q"}
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)  # bytes of a DECIMAL group of 0..9 digits (strings/decimal.cc)
_DIGITS_PER_GROUP = 9


class Layout:
    """The decoder of one column layout: `rows(data, start, end)` gives the images of a WRITE or DELETE event,
    `pairs(data, start, end)` the (before, after) images of an UPDATE event, each a dict of the described columns
    in table order with the values normalised."""

    def __init__(self, rows: Decoded, pairs: Decoded) -> None:
        self.rows = rows
        self.pairs = pairs


def layout_key(columns: list) -> tuple:
    """What a decoder depends on in the library's Column objects of a TABLE_MAP (its metadata): every TABLE_MAP
    makes new objects, so decoders are found again by this key."""
    return tuple((c.type, c.name, c.unsigned, c.character_set_name, *(getattr(c, a, None) for a in _METADATA),
                  tuple(c.enum_values or ()), tuple(c.set_values or ())) for c in columns)


_METADATA = ("max_length", "length_size", "precision", "decimals", "fsp", "bits", "size")


def compile_layout(columns: list, names: frozenset[str], convs: dict[str, Callable]) -> Layout | None:
    """The decoder of rows of `columns` (the library's, from the TABLE_MAP) keeping the columns in `names` with
    `convs` applied; None when a column's type is not one this module reads."""
    scope: dict[str, Any] = {"Decimal": Decimal, "date": date, "datetime": datetime, "timedelta": timedelta}
    body: list[str] = []
    for i, column in enumerate(columns):
        lines = _reader(column, i, scope)
        if lines is None:
            return None
        conv = convs.get(column.name) if column.name in names else None
        if conv is not None:
            scope[f"c{i}"] = conv
        body += [f"if nulls >> {i} & 1:", f"    v{i} = None", "else:"]
        body += ["    " + line for line in lines + _converted(column, i, conv)]
    nb = (len(columns) + 7) // 8
    nulls = "data[o]" if nb == 1 else f"int.from_bytes(data[o:o + {nb}], 'little')"
    image = [f"nulls = {nulls}", f"o += {nb}", *body]
    kept = ", ".join(f"{c.name!r}: v{i}" for i, c in enumerate(columns) if c.name in names)
    source = "\n".join([
        "def rows(data, o, end):",
        "    out = []",
        "    while o < end:",
        *_indent(image, 8),
        f"        out.append({{{kept}}})",
        "    return out if o == end else None",
        "def pairs(data, o, end):",
        "    out = []",
        "    while o < end:",
        *_indent(image, 8),
        f"        before = {{{kept}}}",
        *_indent(image, 8),
        f"        out.append((before, {{{kept}}}))",
        "    return out if o == end else None",
    ])
    exec(compile(source, f"<row decoder {len(columns)} columns>", "exec"), scope)  # noqa: S102
    return Layout(scope["rows"], scope["pairs"])


def _indent(lines: list[str], n: int) -> list[str]:
    return [" " * n + line for line in lines]


def _converted(column, i: int, conv: Callable | None) -> list[str]:
    if column.type == FIELD_TYPE.SET:
        # The library reports an empty SET as None (NONE_SOURCE.EMPTY_SET); normalise_image makes it ''.
        if conv is None:
            return [f"v{i} = v{i} or None"]
        return [f"v{i} = c{i}(v{i}) if v{i} else ''"]
    if conv is None:
        return []
    return [f"if v{i} is not None:", f"    v{i} = c{i}(v{i})"]


def _reader(column, i: int, scope: dict) -> list[str] | None:
    """Lines that read column `i` (known not NULL) at offset `o` into `v{i}` and move `o` past it."""
    t = column.type
    if (t, column.unsigned) in _NUMBERS:
        fmt = "<" + _NUMBERS[t, column.unsigned]
        scope[f"s{i}"] = struct.Struct(fmt).unpack_from
        return [f"v{i} = s{i}(data, o)[0]", f"o += {struct.calcsize(fmt)}"]
    if t == FIELD_TYPE.INT24:
        return [f"v{i} = int.from_bytes(data[o:o + 3], 'little', signed={not column.unsigned})", "o += 3"]
    if t in (FIELD_TYPE.FLOAT, FIELD_TYPE.DOUBLE):
        fmt = "<f" if t == FIELD_TYPE.FLOAT else "<d"
        scope[f"s{i}"] = struct.Struct(fmt).unpack_from
        return [f"v{i} = s{i}(data, o)[0]", f"o += {struct.calcsize(fmt)}"]
    if t == FIELD_TYPE.YEAR:
        return [f"v{i} = data[o] + 1900", "o += 1"]
    if t in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING):
        return _string(column, i, 2 if column.max_length > 255 else 1, scope)
    if t == FIELD_TYPE.BLOB:
        return _string(column, i, column.length_size, scope)
    if t == FIELD_TYPE.GEOMETRY:  # read_length_coded_pascal_string: bytes as they are
        return [*_length(column.length_size), f"v{i} = data[o:o + n]", "o += n"]
    if t == FIELD_TYPE.NEWDECIMAL:
        return _decimal(column.precision, column.decimals, i)
    if t == FIELD_TYPE.DATE:
        scope[f"r{i}"] = _date
        return [f"v{i} = r{i}(data[o] | data[o + 1] << 8 | data[o + 2] << 16)", "o += 3"]
    if t == FIELD_TYPE.DATETIME2:
        # 40 bits big-endian: sign 1, year*13+month 17, day 5, hour 5, minute 6, second 6; then the fraction.
        # A value datetime cannot hold (a zero date) is ZERO_DATE, where the library says None (OUT_OF_RANGE).
        scope["ZERO_DATE"] = ZERO_DATE
        return ["p = int.from_bytes(data[o:o + 5], 'big')", *_fraction(column.fsp, 5), "ym = p >> 22 & 0x1FFFF",
                "try:",
                f"    v{i} = datetime(ym // 13, ym % 13, p >> 17 & 31, p >> 12 & 31, p >> 6 & 63, p & 63, "
                "u if u > 0 else 0)",
                "except ValueError:", f"    v{i} = ZERO_DATE", f"o += {5 + _fsp_bytes(column.fsp)}"]
    if t == FIELD_TYPE.TIMESTAMP2:
        # Seconds since the epoch, 4 bytes big-endian signed, then the fraction: a naive datetime in UTC.
        scope["utc"] = datetime.utcfromtimestamp
        return [f"v{i} = utc(int.from_bytes(data[o:o + 4], 'big', signed=True))", *_fraction(column.fsp, 4),
                "if u > 0:", f"    v{i} = v{i}.replace(microsecond=u)", f"o += {4 + _fsp_bytes(column.fsp)}"]
    if t == FIELD_TYPE.TIME2:
        scope[f"r{i}"] = _time2
        return [*_fraction(column.fsp, 3), f"v{i} = r{i}(int.from_bytes(data[o:o + 3], 'big', signed=True), u)",
                f"o += {3 + _fsp_bytes(column.fsp)}"]
    if t == FIELD_TYPE.ENUM:
        scope[f"e{i}"] = column.enum_values
        index = f"int.from_bytes(data[o:o + {column.size}], 'little')"
        # The library reads the index even without member names, and then says None.
        return [f"v{i} = e{i}[{index}] if e{i} else None", f"o += {column.size}"]
    if t == FIELD_TYPE.SET:
        scope[f"e{i}"] = tuple(column.set_values or ())
        return [f"m = int.from_bytes(data[o:o + {column.size}], 'little')", f"o += {column.size}",
                f"v{i} = {{v for b, v in enumerate(e{i}) if m >> b & 1}}"]
    if t == FIELD_TYPE.BIT:
        width = (column.bits + 7) // 8
        return [f"v{i} = format(int.from_bytes(data[o:o + {width}], 'big') & {(1 << column.bits) - 1}, "
                f"'0{column.bits}b')", f"o += {width}"]
    return None  # JSON (MySQL's binary form), the pre-5.6 temporal types, anything rarer: the library's way


def _length(size: int) -> list[str]:
    if size == 1:
        return ["n = data[o]", "o += 1"]
    return [f"n = int.from_bytes(data[o:o + {size}], 'little')", f"o += {size}"]


def _string(column, i: int, size: int, scope: dict) -> list[str]:
    """As the library's `__read_string`: decoded with the column's codec (table_map.adopt set it), strictly; a
    charset Python lacks (binary among them) leaves the bytes, except an empty value, which Python 'decodes' to ''.
    A single-byte charset's table is applied directly, without looking the codec up by name for each value."""
    if column.character_set_name is None:
        encoding = "utf-8"
    else:
        encoding = RowsEvent.charset_to_encoding(column.character_set_name)
    try:
        codecs.lookup(encoding)
    except LookupError:
        return [*_length(size), f"v{i} = data[o:o + n] or ''", "o += n"]
    if (table := charsets.table(encoding)) is not None:
        scope["charmap"], scope[f"t{i}"] = codecs.charmap_decode, table
        return [*_length(size), f"v{i} = charmap(data[o:o + n], None, t{i})[0]", "o += n"]
    return [*_length(size), f"v{i} = data[o:o + n].decode({encoding!r})", "o += n"]


def _fsp_bytes(fsp: int) -> int:
    return (fsp + 1) // 2


def _fraction(fsp: int, at: int) -> list[str]:
    """Lines setting `u`, the microseconds of the fraction at `o + at`, read as the library's `__read_fsp`
    reads them: (fsp + 1) / 2 bytes big-endian *signed*, an odd fsp's extra digit dropped."""
    if not fsp:
        return ["u = 0"]
    end = at + _fsp_bytes(fsp)
    lines = [f"u = int.from_bytes(data[o + {at}:o + {end}], 'big', signed=True)"]
    if fsp % 2:
        lines.append("u = int(u / 10)")
    return lines + ([f"u *= {10 ** (6 - fsp)}"] if fsp < 6 else [])


def _date(packed: int):
    """DATE: 3 bytes little-endian, day 5 bits, month 4, year 15; a zero part (or a day past the month's end) is
    ZERO_DATE, where the library says None."""
    return date_or_zero(packed >> 9 & 0x7FFF, packed >> 5 & 0xF, packed & 0x1F)


def _time2(packed: int, micro: int) -> timedelta:
    """TIME2: 24 bits big-endian (sign 1, unused 1, hour 10, minute 6, second 6) read signed, then the fraction,
    as the library reads them (values._time2 corrects its negative fractions)."""
    sign = 1 if packed >> 23 & 1 else -1
    if sign == -1:
        packed = ~packed + 1
    return timedelta(hours=packed >> 12 & 0x3FF, minutes=packed >> 6 & 0x3F, seconds=packed & 0x3F,
                     microseconds=micro) * sign


def _decimal(precision: int, scale: int, i: int) -> list[str]:
    """NEWDECIMAL(precision, scale): groups of 9 digits in 4 bytes big-endian, the leading and trailing partial
    groups in fewer (_DIG2BYTES); the first bit flipped is the sign, a negative value has every bit inverted
    (strings/decimal.cc decimal2bin). The library builds the text '[-]<integral>.<fraction>' with every
    fractional digit; '<all the digits>E-<scale>' is the same Decimal (coefficient and exponent)."""
    integral = precision - scale
    groups = ([_DIG2BYTES[integral % _DIGITS_PER_GROUP]] + [4] * (integral // _DIGITS_PER_GROUP)
              + [4] * (scale // _DIGITS_PER_GROUP))
    digits = [integral % _DIGITS_PER_GROUP] + [_DIGITS_PER_GROUP] * (len(groups) - 1)
    if scale % _DIGITS_PER_GROUP:
        groups.append(_DIG2BYTES[scale % _DIGITS_PER_GROUP])
        digits.append(scale % _DIGITS_PER_GROUP)
    size = sum(groups)
    number, shift = "", size * 8  # the digits as one integer, from the most significant group on
    for width, n in zip(groups, digits):
        shift -= width * 8
        if width:
            group = f"(p >> {shift} & {(1 << width * 8) - 1})"
            number = f"({number}) * {10 ** n} + {group}" if number else group
    top, everything = 1 << (size * 8 - 1), (1 << size * 8) - 1
    return [f"p = int.from_bytes(data[o:o + {size}], 'big')",
            f"if p & {top}:", f"    p ^= {top}", f"    v{i} = Decimal(f'{{{number}}}E-{scale}')",
            "else:", f"    p ^= {top ^ everything}", f"    v{i} = Decimal(f'-{{{number}}}E-{scale}')", f"o += {size}"]


class RowDecoders:
    """The specialised decoders of the captured tables, compiled on first sight of each layout. `rows` and
    `pairs` give an event's normalised images, or None when the event must go the library's way."""

    def __init__(self, names: dict, convs: dict) -> None:
        self._names = names  # table -> described column names
        self._convs = convs  # table -> values.converters
        self._layouts: dict[tuple, Layout | None] = {}
        self._last: dict = {}  # table -> (the last TABLE_MAP's column list, its layout): most events hit it

    def rows(self, event, table) -> list[dict] | None:
        """The images of a WRITE or DELETE event."""
        found = self._framed(event, table, (event.columns_present_bitmap,))
        return None if found is None else found[0].rows(*found[1:])

    def pairs(self, event, table) -> list[tuple[dict, dict]] | None:
        """The (before, after) images of an UPDATE event."""
        if type(event) is not UpdateRowsEvent:  # PARTIAL_UPDATE_ROWS_EVENT: JSON diffs need the library
            return None
        found = self._framed(event, table, (event.columns_present_bitmap, event.columns_present_bitmap2))
        return None if found is None else found[0].pairs(*found[1:])

    def _framed(self, event, table, bitmaps: tuple[bytes, ...]) -> tuple[Layout, bytes, int, int] | None:
        """The layout and where the rows lie in the packet: (layout, data, start, end)."""
        columns = event.columns
        n = len(columns)
        whole = ((1 << n) - 1).to_bytes((n + 7) // 8, "little")
        if event.number_of_columns != n or any(b != whole for b in bitmaps):
            return None  # a partial image (MINIMAL/NOBLOB), or a TABLE_MAP that does not fit
        layout = self._layout(columns, table)
        wrapper = event.packet
        packet = wrapper.packet
        if layout is None or wrapper._BinLogPacketWrapper__data_buffer:  # bytes pushed back: not where we read
            return None
        start = packet._position
        return layout, packet._data, start, start + event.event_size - wrapper.read_bytes

    def _layout(self, columns: list, table) -> Layout | None:
        last = self._last.get(table)
        if last is not None and last[0] is columns:
            return last[1]
        key = (table, layout_key(columns))
        if key not in self._layouts:
            self._layouts[key] = compile_layout(columns, self._names[table], self._convs[table])
        self._last[table] = columns, self._layouts[key]
        return self._layouts[key]
