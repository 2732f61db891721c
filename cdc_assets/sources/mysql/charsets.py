"""MySQL/MariaDB character sets -> the Python codec that turns a column's stored bytes into the very text the server
gives the snapshot (`CONVERT(col USING utf8mb4)`, which is also what JDBC reads).

The names differ, and so do the tables behind the same names: MySQL's utf16 is big-endian without a BOM (Python's
'utf16' reads the machine's order), ucs2 is UTF-16BE limited to the BMP, utf32 is UTF-32BE, latin1 is cp1252 whose
five holes are the C1 controls, and where a single-byte charset has no character for a byte the server prints '?'
(or U+FFFD for tis620) where Python's codec raises or maps another character. Each single-byte charset is therefore
decoded through a 256-entry table: Python's codec of the same family, corrected where the server's table differs
(every byte compared with MariaDB 10.11's CONVERT). The multi-byte ones are Python's codecs where the server and
Python agree on every character the server maps (all one- and two-byte sequences compared, and EUC's three-byte ones).

A charset missing here (big5, ujis, eucjpms: the server maps some sequences to other characters than any Python
codec; dec8, hp8, swe7, armscii8, keybcs2, geostd8: no Python codec) cannot be decoded exactly: its text columns are
refused at plan time (`unreadable`). ENUM and SET values travel as indexes into the described labels, so their
charset never matters. `binary` is no text: its columns are BINARY kinds, read as bytes.

Importing this module registers the tables as codecs named 'mysql_<charset>', so that a plain bytes.decode (the
row decoder's) and the library's `__read_string` use them alike.
"""
from __future__ import annotations

import codecs

from cdc_assets.core.tables import TableSchema
from cdc_assets.errors import TableError

# charset -> (Python codec of the family, bytes the server reads otherwise: byte -> its character)
_UNMAPPED = "?"
_SINGLE_BYTE: dict[str, tuple[str, dict[int, str]]] = {
    "latin1": ("cp1252", {b: chr(b) for b in (0x81, 0x8D, 0x8F, 0x90, 0x9D)}),
    "ascii": ("ascii", {}),
    "latin2": ("iso8859_2", {}),
    "latin5": ("iso8859_9", {}),
    "latin7": ("iso8859_13", {}),
    "hebrew": ("iso8859_8", {0xAF: "\u203e"}),
    "greek": ("iso8859_7", {0xA1: "\u02bd", 0xA2: "\u02bc", 0xA4: _UNMAPPED, 0xA5: _UNMAPPED, 0xAA: _UNMAPPED}),
    "tis620": ("tis_620", {b: "\ufffd" for b in (0xA0, 0xDB, 0xDC, 0xDD, 0xDE, 0xFC, 0xFD, 0xFE, 0xFF)}),
    "koi8r": ("koi8_r", {}),
    "koi8u": ("koi8_u", {0x95: "\u2022"}),
    "cp850": ("cp850", {}),
    "cp852": ("cp852", {}),
    "cp866": ("cp866", {0xFC: "\u207f", 0xFD: "\u00b2"}),
    "cp1250": ("cp1250", {}),
    "cp1251": ("cp1251", {}),
    "cp1256": ("cp1256", {b: _UNMAPPED for b in (0x8A, 0x8F, 0x98, 0x9A, 0x9F, 0xAA, 0xC0, 0xFF)}),
    "cp1257": ("cp1257", {}),
    "macce": ("mac_latin2", {}),
    "macroman": ("mac_roman", {}),
}
# charset -> Python codec: the same text for every character the server maps; a sequence it cannot map is no
# text for Python either (a decode error stops the read, where the snapshot would have written '?').
_MULTI_BYTE = {
    "utf8mb4": "utf8", "utf8mb3": "utf8", "utf8": "utf8",  # MySQL 5.7 names utf8mb3 'utf8'
    "utf16": "utf-16-be", "utf16le": "utf-16-le", "ucs2": "utf-16-be", "utf32": "utf-32-be",
    "gbk": "gbk", "gb2312": "gb2312", "cp932": "cp932", "euckr": "cp949", "sjis": "mysql_sjis",
}
SINGLE_BYTE = frozenset(_SINGLE_BYTE)
BINARY = "binary"


def _table(base: str, overrides: dict[int, str]) -> str:
    def char(b: int) -> str:
        if b in overrides:
            return overrides[b]
        try:
            return bytes([b]).decode(base)
        except UnicodeDecodeError:
            return _UNMAPPED
    return "".join(char(b) for b in range(256))


def _charmap(name: str, table: str) -> codecs.CodecInfo:
    encoding = codecs.charmap_build(table)
    return codecs.CodecInfo(name=name, encode=lambda text, errors="strict": codecs.charmap_encode(text, errors, encoding),
                            decode=lambda data, errors="strict": codecs.charmap_decode(data, errors, table))


def _sjis() -> codecs.CodecInfo:
    """Python's shift_jis, but 0x815F, which the server reads as '\\' (U+005C) and Python as U+FF3C: no other
    sequence gives U+FF3C in shift_jis, so it is put back after decoding."""
    base = codecs.lookup("shift_jis")
    fullwidth = {0xFF3C: "\\"}

    def decode(data, errors="strict"):
        try:
            text, n = base.decode(data, errors)
        except UnicodeDecodeError as exc:  # named as ours, so that the error finds the columns in sjis
            raise UnicodeDecodeError("mysql_sjis", exc.object, exc.start, exc.end, exc.reason) from None
        return (text.translate(fullwidth) if "\uff3c" in text else text), n
    return codecs.CodecInfo(name="mysql_sjis", encode=base.encode, decode=decode)


_TABLES = {f"mysql_{cs}": _table(*spec) for cs, spec in _SINGLE_BYTE.items()}
_CODECS = {name: _charmap(name, table) for name, table in _TABLES.items()}
_CODECS["mysql_sjis"] = _sjis()
codecs.register(_CODECS.get)


def table(codec_name: str) -> str | None:
    """The 256-character decoding table behind a single-byte codec of ours: `codecs.charmap_decode` with it is a
    third of the time `bytes.decode(codec_name)` takes (no lookup of the codec by name)."""
    return _TABLES.get(codec_name)


def codec(charset: str | None) -> str | None:
    """The codec name under which `bytes.decode` gives the server's text of a value in `charset`; None when there
    is none (`binary`, or a charset refused at plan time). A column without charset metadata is utf8 (the
    library's assumption for MySQL 5.x)."""
    if charset is None:
        return "utf8"
    if charset in _SINGLE_BYTE:
        return f"mysql_{charset}"
    return _MULTI_BYTE.get(charset)


def unreadable(charset: str | None) -> bool:
    """Whether text in `charset` cannot be decoded exactly from the binlog."""
    return charset not in (None, BINARY) and codec(charset) is None


UNDECODABLE_HINT = ("the server stores this byte sequence but cannot convert it to Unicode (the snapshot reads it as "
                    "'?'): rewrite the value on the source as valid text, then re-snapshot the table (out of "
                    "source.tables for one sync, back in, cdc-assets snapshot); or convert the column to utf8mb4, "
                    "or leave it out with source.exclude_columns")


def undecodable(schema: TableSchema, exc: UnicodeDecodeError, position, where: str) -> TableError:
    """The error for a row image whose text `exc` could not decode: its table, the columns in the failing codec's
    charset, the position, and the offending bytes (a few, never the whole value)."""
    failing = codecs.lookup(exc.encoding).name if exc.encoding != "charmap" else None
    columns = [c for c in schema.columns if c.charset and codec(c.charset)
               and codecs.lookup(codec(c.charset)).name == failing]
    named = ", ".join(f"{c.name} ({c.charset})" for c in columns) or "a text column"
    sequence = bytes(exc.object[exc.start:min(exc.end, exc.start + 8)]).hex(" ")
    return TableError(f"a row change of {schema.table} at {position} in the binlog of {where} holds bytes "
                      f"{sequence} in {named} that are no text of its character set", UNDECODABLE_HINT)
