"""MySQL 8 binlog events laid out byte for byte as the server writes them, and a replay of them through the
library's own stream reader (BinLogStreamReader.fetchone), for pure tests of what MariaDB never sends.

Formats (MySQL internals manual "Binary log events", mysql-server libbinlogevents/include/*.h):
- common header, 19 bytes: timestamp u32, type u8, server_id u32, event_size u32 (all of it, checksum included),
  log_pos u32 (offset after the event), flags u16; then the body; then CRC32 of header+body (binlog_checksum=CRC32,
  MySQL 8's default) -- except inside a TRANSACTION_PAYLOAD_EVENT, whose inner events carry none;
- TABLE_MAP (19): table_id u48, flags u16, schema (u8 length, bytes, 0), table (same), column count (lenenc),
  types, metadata (lenenc length, bytes), null bitmap, optional metadata TLVs (binlog_row_metadata=FULL);
- ROWS v2 (30 write, 31 update, 32 delete, 39 partial update): table_id u48, flags u16, extra-data length u16 (2:
  none), column count (lenenc), columns-present bitmap (two for updates), then rows: null bitmap and values
  (sql/rpl_record.cc pack_row; PARTIAL_UPDATE's after image starts with value_options (lenenc) and, when
  PARTIAL_JSON is set, one partial bit per JSON column of the table);
- QUERY (2): thread_id u32, exec_time u32, schema length u8, error_code u16, status-vars length u16, status vars,
  schema, 0, statement;  XID (16): xid u64;
- GTID (33, control_events.h Gtid_event): flags u8, sid 16 bytes, gno u64, lt_type u8 (2), last_committed u64,
  sequence_number u64, immediate_commit_timestamp 7 bytes (top bit clear: original = immediate),
  transaction_length (lenenc), immediate_server_version u32 (top bit clear: original = immediate).
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

import zstandard
from pymysql.protocol import MysqlPacket

QUERY, XID, TABLE_MAP, WRITE_ROWS, UPDATE_ROWS, DELETE_ROWS, GTID, XA_PREPARE, PARTIAL_UPDATE_ROWS = (
    2, 16, 19, 30, 31, 32, 33, 38, 39)
TRANSACTION_PAYLOAD = 40
MYSQL_TYPE_LONG, MYSQL_TYPE_LONGLONG, MYSQL_TYPE_JSON = 3, 8, 245
COLUMN_NAME, SIGNEDNESS, SIMPLE_PRIMARY_KEY, VISIBILITY = 4, 1, 8, 12
SERVER_ID = 1
TIMESTAMP = 1_700_000_000
SID = bytes.fromhex("3e11fa4771ca11e19e33c80aa9429562")


def lenenc(n: int) -> bytes:
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def bitmap(bits: list[bool]) -> bytes:
    out = bytearray((len(bits) + 7) // 8)
    for i, bit in enumerate(bits):
        if bit:
            out[i // 8] |= 1 << (i % 8)
    return bytes(out)


def event(kind: int, body: bytes, log_pos: int, checksum: bool = True) -> bytes:
    size = 19 + len(body) + (4 if checksum else 0)
    raw = struct.pack("<IBIIIH", TIMESTAMP, kind, SERVER_ID, size, log_pos, 0) + body
    return raw + struct.pack("<I", zlib.crc32(raw)) if checksum else raw


def query(statement: str, schema: str = "shop") -> bytes:
    return (struct.pack("<IIBHH", 7, 0, len(schema.encode()), 0, 0) + schema.encode() + b"\0" + statement.encode())


def xid(number: int) -> bytes:
    return struct.pack("<Q", number)


def xa_prepare(gtrid: bytes, bqual: bytes, format_id: int = 1, one_phase: bool = False) -> bytes:
    """XA_PREPARE_LOG_EVENT (control_events.h XA_prepare_event): one_phase u8, formatID u32, gtrid length u32,
    bqual length u32, gtrid then bqual."""
    return struct.pack("<BIII", one_phase, format_id, len(gtrid), len(bqual)) + gtrid + bqual


def gtid(gno: int, transaction_length: int = 0) -> bytes:
    return (b"\x00" + SID + struct.pack("<QB", gno, 2) + struct.pack("<QQ", gno - 1, gno)
            + (TIMESTAMP * 1_000_000).to_bytes(7, "little") + lenenc(transaction_length) + struct.pack("<I", 80036))


@dataclass(frozen=True)
class Col:
    name: str
    type: int
    meta: bytes = b""  # per-type metadata in the table map: JSON has its length size (4)
    nullable: bool = True


INT = lambda name, nullable=False: Col(name, MYSQL_TYPE_LONG, b"", nullable)  # noqa: E731
JSON = lambda name: Col(name, MYSQL_TYPE_JSON, b"\x04")  # noqa: E731


def table_map(table_id: int, schema: str, table: str, cols: list[Col], pk: list[int]) -> bytes:
    """With binlog_row_metadata=FULL's optional metadata, in the order Table_map_log_event::init_metadata_fields
    writes it: SIGNEDNESS (one bit per numeric column, most significant first; 0 = signed), COLUMN_NAME,
    SIMPLE_PRIMARY_KEY, VISIBILITY (8.0.23+, one bit per column, most significant first; all set here)."""
    numeric = [c for c in cols if c.type in (MYSQL_TYPE_LONG, MYSQL_TYPE_LONGLONG)]
    names = b"".join(lenenc(len(c.name.encode())) + c.name.encode() for c in cols)
    pks = b"".join(lenenc(i) for i in pk)
    optional = (bytes([SIGNEDNESS]) + lenenc((len(numeric) + 7) // 8) + bytes((len(numeric) + 7) // 8)
                + bytes([COLUMN_NAME]) + lenenc(len(names)) + names
                + bytes([SIMPLE_PRIMARY_KEY]) + lenenc(len(pks)) + pks
                + bytes([VISIBILITY]) + lenenc((len(cols) + 7) // 8) + _msb_bitmap([True] * len(cols)))
    meta = b"".join(c.meta for c in cols)
    return (table_id.to_bytes(6, "little") + b"\x01\x00" + bytes([len(schema)]) + schema.encode() + b"\0"
            + bytes([len(table)]) + table.encode() + b"\0" + lenenc(len(cols)) + bytes(c.type for c in cols)
            + lenenc(len(meta)) + meta + bitmap([c.nullable for c in cols]) + optional)


def _msb_bitmap(bits: list[bool]) -> bytes:
    out = bytearray((len(bits) + 7) // 8)
    for i, bit in enumerate(bits):
        if bit:
            out[i // 8] |= 0x80 >> (i % 8)
    return bytes(out)


def value(col: Col, v) -> bytes:
    if col.type == MYSQL_TYPE_LONG:
        return struct.pack("<i", v)
    if col.type == MYSQL_TYPE_JSON:
        return struct.pack("<I", len(v)) + v  # v: binary JSON bytes (see json_binary)
    raise NotImplementedError(col.type)


def row(cols: list[Col], values: list) -> bytes:
    """A full row image: null bitmap over all columns, then the non-NULL values."""
    return bitmap([v is None for v in values]) + b"".join(value(c, v) for c, v in zip(cols, values) if v is not None)


def rows_event(table_id: int, cols: list[Col], images: list[bytes], two_bitmaps: bool = False,
               present: list[bool] | None = None) -> bytes:
    """`present`: the first columns-present bitmap (binlog_row_image=MINIMAL logs only the key in a before image)."""
    everything = bitmap([True] * len(cols))
    first = everything if present is None else bitmap(present)
    return (table_id.to_bytes(6, "little") + b"\x01\x00" + struct.pack("<H", 2) + lenenc(len(cols)) + first
            + (everything if two_bitmaps else b"") + b"".join(images))


def partial_after_image(cols: list[Col], values: list, partial: dict[str, bytes]) -> bytes:
    """PARTIAL_UPDATE_ROWS_EVENT's after image (rpl_record.cc pack_row): value_options PARTIAL_JSON (1), one bit per
    JSON column (set: its value is a Json_diff_vector), null bitmap, values; a partial column's value is the
    diff vector (json_diff.cc Json_diff_vector::write_binary: u32 length, then the diffs)."""
    json_cols = [c for c in cols if c.type == MYSQL_TYPE_JSON]
    body = lenenc(1) + bitmap([c.name in partial for c in json_cols])
    body += bitmap([v is None and c.name not in partial for c, v in zip(cols, values)])
    for c, v in zip(cols, values):
        if c.name in partial:
            body += struct.pack("<I", len(partial[c.name])) + partial[c.name]
        elif v is not None:
            body += value(c, v)
    return body


def json_diff(op: int, path: str, doc: bytes | None = None) -> bytes:
    """One Json_diff (json_diff.cc Json_diff::write_binary): operation u8 (0 REPLACE, 1 INSERT, 2 REMOVE), path
    text (lenenc length), and for REPLACE/INSERT the value as binary JSON (lenenc length)."""
    out = bytes([op]) + lenenc(len(path.encode())) + path.encode()
    return out if doc is None else out + lenenc(len(doc)) + doc


def transaction_payload(inner: list[bytes], compression: int = 0) -> bytes:
    """Transaction_payload::encode: COMPRESSION_TYPE, UNCOMPRESSED_SIZE (only when compressed), PAYLOAD_SIZE, each
    as lenenc type, lenenc length, lenenc value; the end mark; then the payload."""
    raw = b"".join(inner)
    payload = zstandard.ZstdCompressor().compress(raw) if compression == 0 else raw

    def field_(kind: int, v: int) -> bytes:
        return lenenc(kind) + lenenc(len(lenenc(v))) + lenenc(v)
    header = field_(2, compression) + (field_(3, len(raw)) if compression != 255 else b"") + field_(1, len(payload))
    return header + lenenc(0) + payload


@dataclass
class Binlog:
    """Events appended with their real offsets (the file starts with the 4-byte magic number)."""
    events: list[bytes] = field(default_factory=list)
    end: int = 4

    def add(self, kind: int, body: bytes) -> int:
        size = 19 + len(body) + 4
        self.end += size
        self.events.append(event(kind, body, self.end))
        return self.end


class _Stream:
    """The replication connection's side the library reads: one packet per event, then EOF."""

    def __init__(self, events: list[bytes]) -> None:
        self._packets = [MysqlPacket(b"\0" + e, "utf8") for e in events] + [MysqlPacket(b"\xfe\0\0\0\0", "utf8")]

    def _read_packet(self):
        return self._packets.pop(0)

    def close(self) -> None:
        pass


class _Control:
    """The control connection: with binlog_row_metadata=FULL names come from the table map, so it is never
    queried; the library asks it which server it is."""

    charset = "utf8mb4"

    def _get_dbms(self) -> str:
        return "mysql"

    def close(self) -> None:
        pass


def replay(stream, events: list[bytes], mysql_version=(8, 0, 36)) -> list:
    """Everything `stream` (a BinLogStreamReader as the reader opens it, never connected) returns for `events`."""
    stream._BinLogStreamReader__connected_stream = True
    stream._BinLogStreamReader__connected_ctl = True
    stream._BinLogStreamReader__use_checksum = True
    stream._BinLogStreamReader__optional_meta_data = True
    stream._stream_connection = _Stream(events)
    stream._ctl_connection = _Control()
    stream.mysql_version = mysql_version
    out = []
    while (e := stream.fetchone()) is not None:
        out.append(e)
    return out


# ---- binary JSON (sql/json_binary.h) ------------------------------------------------------------------------------

J_SMALL_OBJECT, J_LARGE_OBJECT, J_SMALL_ARRAY, J_LARGE_ARRAY, J_LITERAL = 0x00, 0x01, 0x02, 0x03, 0x04
J_INT16, J_INT32, J_INT64, J_DOUBLE, J_STRING = 0x05, 0x07, 0x09, 0x0B, 0x0C
J_NULL, J_TRUE, J_FALSE = 0x00, 0x01, 0x02


def json_binary(doc, large: bool = False) -> bytes:
    """A JSON document as MySQL stores it: type byte, then the value. Objects and arrays in the small format
    (16-bit counts, sizes and offsets) or, with `large`, the large one (32-bit). Object keys are stored sorted by
    length, then bytewise (Json_key_comparator)."""
    kind, data = _jvalue(doc, large)
    return bytes([kind]) + data


def _jvalue(v, large: bool) -> tuple[int, bytes]:
    if v is None or isinstance(v, bool):
        return J_LITERAL, bytes([J_NULL if v is None else J_TRUE if v else J_FALSE])
    if isinstance(v, int):
        if -(1 << 15) <= v < 1 << 15:
            return J_INT16, struct.pack("<h", v)
        if -(1 << 31) <= v < 1 << 31:
            return J_INT32, struct.pack("<i", v)
        return J_INT64, struct.pack("<q", v)
    if isinstance(v, float):
        return J_DOUBLE, struct.pack("<d", v)
    if isinstance(v, str):
        raw = v.encode()
        return J_STRING, _varlen(len(raw)) + raw
    if isinstance(v, dict):
        return (J_LARGE_OBJECT if large else J_SMALL_OBJECT), _container(v, large)
    if isinstance(v, list):
        return (J_LARGE_ARRAY if large else J_SMALL_ARRAY), _container(v, large)
    raise TypeError(v)


def _varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _inline(kind: int, large: bool) -> bool:
    return kind in (J_LITERAL, J_INT16) or (large and kind == J_INT32)


def _container(v, large: bool) -> bytes:
    width = 4 if large else 2
    pack = (lambda n: struct.pack("<I", n)) if large else (lambda n: struct.pack("<H", n))
    if isinstance(v, dict):
        keys = sorted((k.encode() for k in v), key=lambda k: (len(k), k))
        values = [v[k.decode()] for k in keys]
    else:
        keys, values = [], list(v)
    header = 2 * width + len(keys) * (width + 2) + len(values) * (1 + width)
    key_entries, key_bytes, at = b"", b"", header
    for k in keys:
        key_entries += pack(at) + struct.pack("<H", len(k))
        key_bytes += k
        at += len(k)
    value_entries, value_bytes = b"", b""
    for item in values:
        kind, data = _jvalue(item, large)
        if _inline(kind, large):
            value_entries += bytes([kind]) + data.ljust(width, b"\0")
        else:
            value_entries += bytes([kind]) + pack(at)
            value_bytes += data
            at += len(data)
    return pack(len(values)) + pack(at) + key_entries + value_entries + key_bytes + value_bytes
