"""Decoder of `pgoutput` logical replication messages, protocol version 1. Pure: bytes in, values out.

Wire format (PostgreSQL 15 docs, "Logical Replication Message Formats",
https://www.postgresql.org/docs/15/protocol-logicalrep-message-formats.html). Integers are big-endian; a
String is NUL-terminated; LSNs are Int64; timestamps are Int64 microseconds since 2000-01-01 UTC.

    Begin     Byte1('B') Int64 final LSN (of the commit record), Int64 commit timestamp, Int32 xid
    Commit    Byte1('C') Int8 flags (unused, 0), Int64 commit LSN, Int64 end LSN of the transaction,
              Int64 commit timestamp
    Origin    Byte1('O') Int64 commit LSN on the origin server, String origin name
    Relation  Byte1('R') Int32 relation id, String namespace ('' for pg_catalog), String relation name,
              Int8 replica identity (relreplident), Int16 number of columns, then per column
              (generated columns excluded): Int8 flags (1 = part of the key), String name,
              Int32 type OID, Int32 atttypmod
    Type      Byte1('Y') Int32 type OID, String namespace, String type name
    Insert    Byte1('I') Int32 relation id, Byte1('N'), TupleData new tuple
    Update    Byte1('U') Int32 relation id, [Byte1('K') TupleData key | Byte1('O') TupleData old tuple],
              Byte1('N') TupleData new tuple   -- 'K' when the key changed, 'O' with REPLICA IDENTITY FULL
    Delete    Byte1('D') Int32 relation id, Byte1('K') TupleData key | Byte1('O') TupleData old tuple
    Truncate  Byte1('T') Int32 number of relations, Int8 options (1 = CASCADE, 2 = RESTART IDENTITY),
              Int32 relation id per relation
    TupleData Int16 number of columns, then per column one of: Byte1('n') NULL | Byte1('u') unchanged
              TOASTed value (not sent) | Byte1('t') Int32 length, text bytes | Byte1('b') Int32 length,
              binary bytes

Text is decoded as UTF-8: the walsender converts to the client encoding, which the reader sets to UTF8.
Messages a v1 stream only sends on request ('M' logical messages) are refused with ValueError.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Union

BEGIN = b"B"
COMMIT = b"C"
ORIGIN = b"O"
RELATION = b"R"
TYPE = b"Y"
INSERT = b"I"
UPDATE = b"U"
DELETE = b"D"
TRUNCATE = b"T"

NEW_TUPLE = b"N"
KEY_TUPLE = b"K"
OLD_TUPLE = b"O"

NULL = b"n"
UNCHANGED_TOAST = b"u"
TEXT = b"t"
BINARY = b"b"

KEY_COLUMN = 1  # Relation column flag: the column belongs to the replica identity
SLICED_MESSAGE_BYTES = 64 << 10  # the largest message whose ASCII text values are sliced from one decode
TRUNCATE_CASCADE = 1
TRUNCATE_RESTART_IDENTITY = 2

PG_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)

_INT16 = struct.Struct(">h").unpack_from
_INT32 = struct.Struct(">i").unpack_from
_UINT32 = struct.Struct(">I").unpack_from
_INSERT_TAG, _UPDATE_TAG, _NEW = INSERT[0], UPDATE[0], NEW_TUPLE[0]
_NULL, _UNCHANGED, _TEXT, _BINARY = NULL[0], UNCHANGED_TOAST[0], TEXT[0], BINARY[0]  # as `bytes[i]` reads them


class _Unchanged:
    """An unchanged TOASTed value the server did not send: the column keeps its stored value."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()

Value = Union[str, bytes, None, _Unchanged]  # str for 't', bytes for 'b'


@dataclass(frozen=True)
class Begin:
    final_lsn: int
    commit_time: datetime
    xid: int


@dataclass(frozen=True)
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int  # the resume point after this transaction
    commit_time: datetime


@dataclass(frozen=True)
class Origin:
    commit_lsn: int
    name: str


@dataclass(frozen=True)
class RelationColumn:
    flags: int
    name: str
    type_oid: int
    atttypmod: int

    @property
    def is_key(self) -> bool:
        return bool(self.flags & KEY_COLUMN)


@dataclass(frozen=True)
class Relation:
    relation_id: int
    namespace: str
    name: str
    replica_identity: str  # 'd' default (primary key), 'n' nothing, 'f' full, 'i' index
    columns: tuple[RelationColumn, ...]


@dataclass(frozen=True)
class Type:
    type_oid: int
    namespace: str
    name: str


@dataclass(slots=True)  # a message per row: see RowChange
class Insert:
    relation_id: int
    new: tuple[Value, ...]


@dataclass(slots=True)  # a message per row: see RowChange
class Update:
    relation_id: int
    old: tuple[Value, ...] | None  # the old row (REPLICA IDENTITY FULL) or its old key; None if not sent
    new: tuple[Value, ...]
    old_is_key: bool = False  # `old` came as 'K': only key columns carry values


@dataclass(slots=True)  # a message per row: see RowChange
class Delete:
    relation_id: int
    old: tuple[Value, ...]
    old_is_key: bool = True


@dataclass(frozen=True)
class Truncate:
    relation_ids: tuple[int, ...]
    options: int


Message = Union[Begin, Commit, Origin, Relation, Type, Insert, Update, Delete, Truncate]


def _tuple_data(data: bytes, pos: int) -> tuple[tuple[Value, ...], int]:
    """The TupleData at `pos`, and where it ends. One loop over the bytes with locals: the hottest code of the log
    phase (a call per column cost more). When the tuple's bytes are all ASCII (short values of plain text, most
    rows), the message is decoded once and each text value is a slice of it, without a decode per value."""
    (count,) = _INT16(data, pos)
    pos += 2
    values: list[Value] = []
    append = values.append
    # Byte offsets are character offsets in an ASCII text. Large messages take the other path: the copies made to
    # check and decode a whole message would triple its memory, and one decode call per large value costs nothing.
    text = data.decode("latin-1") if len(data) <= SLICED_MESSAGE_BYTES and data[pos:].isascii() else None
    for _ in range(count):
        kind = data[pos]
        pos += 1
        if kind == _TEXT or kind == _BINARY:
            (length,) = _INT32(data, pos)
            start, pos = pos + 4, pos + 4 + length
            if pos > len(data):
                raise ValueError(f"a column value of {length} bytes runs past the end of the message")
            if kind != _TEXT:
                append(data[start:pos])
            elif text is not None:
                append(text[start:pos])
            else:
                append(data[start:pos].decode("utf-8"))
        elif kind == _NULL:
            append(None)
        elif kind == _UNCHANGED:
            append(UNCHANGED)
        else:
            raise ValueError(f"unknown tuple column kind {bytes([kind])!r} at byte {pos - 1}")
    return tuple(values), pos


class _Reader:
    """A cursor over one message's bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def unpack(self, fmt: str) -> tuple:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values

    def byte(self) -> bytes:
        self.pos += 1
        return self.data[self.pos - 1:self.pos]

    def string(self) -> str:
        end = self.data.index(b"\0", self.pos)
        text = self.data[self.pos:end].decode("utf-8")
        self.pos = end + 1
        return text

    def timestamp(self) -> datetime:
        return PG_EPOCH + timedelta(microseconds=self.unpack(">q")[0])

    def tuple_data(self) -> tuple[Value, ...]:
        values, self.pos = _tuple_data(self.data, self.pos)
        return values

    def old_and_new(self) -> tuple[tuple[Value, ...] | None, bool, tuple[Value, ...]]:
        marker = self.byte()
        old, is_key = None, False
        if marker in (KEY_TUPLE, OLD_TUPLE):
            old, is_key = self.tuple_data(), marker == KEY_TUPLE
            marker = self.byte()
        if marker != NEW_TUPLE:
            raise ValueError(f"expected a new tuple ('N'), got {marker!r}")
        return old, is_key, self.tuple_data()


def _relation(r: _Reader) -> Relation:
    relation_id, namespace, name = r.unpack(">I")[0], r.string(), r.string()
    identity, count = r.unpack(">b")[0], r.unpack(">h")[0]
    columns = []
    for _ in range(count):
        flags, column = r.unpack(">b")[0], r.string()
        type_oid, typmod = r.unpack(">Ii")
        columns.append(RelationColumn(flags, column, type_oid, typmod))
    return Relation(relation_id, namespace, name, chr(identity), tuple(columns))


def _update(r: _Reader) -> Update:
    (relation_id,) = r.unpack(">I")
    old, is_key, new = r.old_and_new()
    return Update(relation_id, old, new, is_key)


def _delete(r: _Reader) -> Delete:
    (relation_id,) = r.unpack(">I")
    marker = r.byte()
    if marker not in (KEY_TUPLE, OLD_TUPLE):
        raise ValueError(f"expected a key ('K') or old ('O') tuple in a delete, got {marker!r}")
    return Delete(relation_id, r.tuple_data(), marker == KEY_TUPLE)


def _insert(r: _Reader) -> Insert:
    (relation_id,) = r.unpack(">I")
    if (marker := r.byte()) != NEW_TUPLE:
        raise ValueError(f"expected a new tuple ('N') in an insert, got {marker!r}")
    return Insert(relation_id, r.tuple_data())


def _truncate(r: _Reader) -> Truncate:
    count, options = r.unpack(">Ib")
    return Truncate(r.unpack(f">{count}I"), options)


_DECODERS = {
    BEGIN: lambda r: Begin(r.unpack(">Q")[0], r.timestamp(), r.unpack(">I")[0]),
    COMMIT: lambda r: Commit(r.unpack(">b")[0], *r.unpack(">QQ"), r.timestamp()),
    ORIGIN: lambda r: Origin(r.unpack(">Q")[0], r.string()),
    RELATION: _relation,
    TYPE: lambda r: Type(r.unpack(">I")[0], r.string(), r.string()),
    INSERT: _insert,
    UPDATE: _update,
    DELETE: _delete,
    TRUNCATE: _truncate,
}


def decode(payload: bytes) -> Message:
    """Decode one message (the XLogData payload). Raises ValueError on a type v1 does not send unasked."""
    tag = payload[0]
    # Most messages: an insert, or an update without an old tuple (its key did not change), decoded without a
    # _Reader. Anything else, malformed ones too, takes the general path.
    if (tag == _INSERT_TAG or tag == _UPDATE_TAG) and len(payload) > 5 and payload[5] == _NEW:
        data = bytes(payload)
        relation_id, new = _UINT32(data, 1)[0], _tuple_data(data, 6)[0]
        return Insert(relation_id, new) if tag == _INSERT_TAG else Update(relation_id, None, new)
    reader = _Reader(payload)
    tag = reader.byte()
    decoder = _DECODERS.get(tag)
    if decoder is None:
        raise ValueError(f"unknown pgoutput message type {tag!r}")
    return decoder(reader)
