"""A TABLE_MAP's columns told how to read their text as the snapshot reads it, once per TABLE_MAP, before the
library or the row decoder decodes a row with them.

The library picks a column's codec from the collation id in the binlog's metadata, by its own table of ids and
its own charset -> codec names: utf16 comes out in the machine's byte order, ucs2 as raw bytes, utf32 not at all,
and an id it does not know as utf8. ENUM and SET labels it decodes as utf8, '' when that fails. Here the described
column (information_schema, as the snapshot sees it) decides instead: its charset gives the codec (charsets.py), its
labels the ENUM/SET members. A column the task does not carry is still read past, never kept: its text is decoded
as latin-1, which takes every byte.
"""
from __future__ import annotations

from pymysqlreplication.constants import FIELD_TYPE

from cdc_assets.core.tables import Kind, TableSchema
from cdc_assets.sources.mysql import charsets

_TEXT_TYPES = {FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING, FIELD_TYPE.BLOB}
_ANY_BYTES = "latin-1"
# The library's codec names back to charsets, for a plan written before the described columns held their charset.
_LIBRARY_NAMES = {"utf8": "utf8mb4", "cp1252": "latin1", "koi8_r": "koi8r", "koi8_u": "koi8u"}


def adopt(columns: list, schema: TableSchema) -> None:
    """Set each library Column's `character_set_name` to the codec of its described charset (the library and the
    row decoder both decode with that name) and its ENUM/SET members to the described labels."""
    described = {c.name: c for c in schema.columns}
    for column in columns:
        ours = described.get(column.name)
        if column.type == FIELD_TYPE.ENUM or column.type == FIELD_TYPE.SET:
            # A plan written before the labels were read exactly (no charset) keeps the binlog's.
            if ours is not None and ours.kind in (Kind.ENUM, Kind.SET) and ours.charset:
                if column.type == FIELD_TYPE.ENUM:
                    column.enum_values = ["", *ours.values]  # index 0: the empty value an invalid one is stored as
                else:
                    column.set_values = list(ours.values)
        elif column.type in _TEXT_TYPES and column.character_set_name not in (None, charsets.BINARY):
            if ours is None:
                column.character_set_name = _ANY_BYTES
            elif ours.kind == Kind.STRING:
                charset = ours.charset or _LIBRARY_NAMES.get(column.character_set_name, column.character_set_name)
                # None only for a plan written before charsets were described: it keeps the library's codec.
                column.character_set_name = charsets.codec(charset) or column.character_set_name
