"""MySQL >= 8.0.20 compressed transactions (binlog_transaction_compression=ON): TRANSACTION_PAYLOAD_EVENT.

python-mysql-replication 1.0.17 has no class for event type 40: it becomes a NotImplementedEvent, which
`only_events` drops, so every row of a compressed transaction vanished without a word. The setting is also
per session (SET SESSION binlog_transaction_compression=ON), so no check at plan time can rule it out. This
module reads the event and parses its inner events with the library's own event classes.

Wire format (mysql-server libbinlogevents/src/codecs/binary.cpp, Transaction_payload::encode and ::decode;
libbinlogevents/include/control_events.h, Transaction_payload_event):

    header fields, each  net_field_length(type) net_field_length(length) value  (value: net_field_length)
        COMPRESSION_TYPE = 2   (0 ZSTD, 255 NONE)
        UNCOMPRESSED_SIZE = 3  (written only when compressed)
        PAYLOAD_SIZE = 1
        unknown types are skipped by their length
    HEADER_END_MARK = 0
    payload: PAYLOAD_SIZE bytes, the zstd frame(s) of the transaction's events (QUERY "BEGIN", TABLE_MAP, ROWS
        ..., XID), each a whole event with its 19-byte header and no checksum (MySQL manual, "Binary Log
        Transaction Compression": only the Transaction_payload_event as a whole carries one).

Only row-based transactional groups are compressed (XA ones too); GTID events, DDL, statement-based and
non-transactional groups stay uncompressed. A compressed transaction arrives as one packet (bounded by the
server's max_allowed_packet) and is held decompressed while its events are read.

The GTID event stays outside, before the payload. Positions come from the payload event, not from the inner
headers: the last inner event (the XID or COMMIT that ends the transaction) gets the payload event's log_pos,
the offset after it, which the reader hands out as the boundary; every other inner event gets the offset where
the payload event starts, inside the transaction like the row events of an uncompressed one.
"""
from __future__ import annotations

from dataclasses import dataclass

import zstandard
from pymysql.protocol import MysqlPacket
from pymysqlreplication.event import BinLogEvent, NotImplementedEvent
from pymysqlreplication.packet import BinLogPacketWrapper

from cdc_assets.core.positions import MysqlPosition
from cdc_assets.errors import REPLAN_HINT, SourceSetupError

PAYLOAD_HINT = ("set binlog_transaction_compression=OFF on the source (globally and in the writing sessions), "
                "then " + REPLAN_HINT)

TRANSACTION_PAYLOAD_EVENT = 40
HEADER_END_MARK, PAYLOAD_SIZE, COMPRESSION_TYPE, UNCOMPRESSED_SIZE = 0, 1, 2, 3
ZSTD, NONE = 0, 255
EVENT_HEADER_LENGTH = 19  # timestamp 4, type 1, server_id 4, event_size 4, log_pos 4, flags 2
EVENT_SIZE_OFFSET = 9
OK_BYTE = b"\0"  # every packet of the replication stream starts with it; the library's wrapper skips it
# The library assumes a 4-byte checksum after every event (TableMapEvent's optional metadata loop stops 4 bytes
# before the packet end): inner events have none, so each gets a 4-byte trailer outside its event_size.
CHECKSUM_STANDIN = b"\0\0\0\0"


class PayloadError(ValueError):
    """The payload cannot be read as MySQL writes it."""


@dataclass(frozen=True)
class PayloadHeader:
    compression: int
    payload_size: int
    uncompressed_size: int
    payload_at: int  # offset of the payload in the event body


def net_field_length(data: bytes, at: int) -> tuple[int, int]:
    """A length-encoded integer (MySQL net_field_length): the value and the offset after it."""
    if at >= len(data):
        raise PayloadError("truncated length-encoded integer")
    first = data[at]
    if first < 251:
        return first, at + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None or at + 1 + width > len(data):
        raise PayloadError(f"bad length-encoded integer (first byte {first})")
    return int.from_bytes(data[at + 1:at + 1 + width], "little"), at + 1 + width


def read_header(body: bytes) -> PayloadHeader:
    fields: dict[int, int] = {}
    at = 0
    while True:
        kind, at = net_field_length(body, at)
        if kind == HEADER_END_MARK:
            break
        length, at = net_field_length(body, at)
        if kind in (PAYLOAD_SIZE, COMPRESSION_TYPE, UNCOMPRESSED_SIZE):
            fields[kind], _ = net_field_length(body, at)
        at += length
    if PAYLOAD_SIZE not in fields:
        raise PayloadError("no payload size in the header")
    size = fields[PAYLOAD_SIZE]
    if at + size > len(body):
        raise PayloadError(f"payload of {size} bytes announced, {len(body) - at} present")
    # Transaction_payload::decode: an absent uncompressed size defaults to the payload size.
    return PayloadHeader(fields.get(COMPRESSION_TYPE, NONE), size, fields.get(UNCOMPRESSED_SIZE, size), at)


def inner_events(body: bytes) -> list[bytes]:
    """The events inside a TRANSACTION_PAYLOAD_EVENT body (after its common header, without its checksum)."""
    header = read_header(body)
    payload = body[header.payload_at:header.payload_at + header.payload_size]
    if header.compression == ZSTD:
        # MySQL may write several frames for one transaction; read them all.
        reader = zstandard.ZstdDecompressor().stream_reader(payload, read_across_frames=True)
        try:
            raw = reader.read()
        except zstandard.ZstdError as exc:
            raise PayloadError(f"zstd: {exc}") from None
    elif header.compression == NONE:
        raw = payload
    else:
        raise PayloadError(f"unknown compression type {header.compression}")
    if len(raw) != header.uncompressed_size:
        raise PayloadError(f"{len(raw)} bytes uncompressed, {header.uncompressed_size} announced")
    return _split(raw)


def _split(raw: bytes) -> list[bytes]:
    events, at = [], 0
    while at < len(raw):
        if at + EVENT_HEADER_LENGTH > len(raw):
            raise PayloadError(f"truncated event header at offset {at} of the payload")
        size = int.from_bytes(raw[at + EVENT_SIZE_OFFSET:at + EVENT_SIZE_OFFSET + 4], "little")
        if size < EVENT_HEADER_LENGTH or at + size > len(raw):
            raise PayloadError(f"event of {size} bytes at offset {at} of a {len(raw)}-byte payload")
        events.append(raw[at:at + size])
        at += size
    return events


class TransactionPayloadEvent(BinLogEvent):
    """A compressed transaction: `events` are its inner events, parsed by the library's classes (only those the
    library implements; row events of tables outside only_schemas/only_tables are dropped as usual), positioned
    as the module says. `failure` says why the payload could not be read (the reader halts on it)."""

    def __init__(self, from_packet, event_size, table_map, ctl_connection, **kwargs) -> None:
        super().__init__(from_packet, event_size, table_map, ctl_connection, **kwargs)
        self.log_pos = from_packet.log_pos
        start = from_packet.log_pos - from_packet.event_size
        self.events: list[BinLogEvent] = []
        self.failure: str | None = None
        try:
            raw_events = inner_events(self.packet.read(event_size))
        except PayloadError as exc:
            self.failure = str(exc)
            return
        for i, raw in enumerate(raw_events):
            wrapper = BinLogPacketWrapper(
                MysqlPacket(OK_BYTE + raw + CHECKSUM_STANDIN, "utf8"), table_map, ctl_connection,
                kwargs["mysql_version"], False, _INNER_EVENTS, kwargs["only_tables"], kwargs["ignored_tables"],
                kwargs["only_schemas"], kwargs["ignored_schemas"], kwargs["freeze_schema"],
                kwargs["ignore_decode_errors"], False, kwargs["optional_meta_data"], kwargs["enable_logging"],
                kwargs.get("use_column_name_cache", False), kwargs.get("post_header_lengths"))
            if wrapper.event is not None:  # TableMapEvent registers itself in table_map while parsing
                wrapper.log_pos = self.log_pos if i == len(raw_events) - 1 else start
                self.events.append(wrapper.event)


def events_of(event: TransactionPayloadEvent, file: str, where: str) -> list[BinLogEvent]:
    """The inner events of a compressed transaction in `file` of the binlog of `where`; raises SourceSetupError
    when its payload could not be read."""
    if event.failure is not None:
        end = MysqlPosition(file, event.log_pos)
        raise SourceSetupError(f"cannot read the compressed transaction (TRANSACTION_PAYLOAD_EVENT) ending at "
                               f"{end} in the binlog of {where}: {event.failure}", PAYLOAD_HINT)
    return event.events


_EVENT_MAP: dict = BinLogPacketWrapper._BinLogPacketWrapper__event_map  # type: ignore[attr-defined]
_INNER_EVENTS = frozenset(c for c in _EVENT_MAP.values() if c is not NotImplementedEvent)
_EVENT_MAP[TRANSACTION_PAYLOAD_EVENT] = TransactionPayloadEvent
