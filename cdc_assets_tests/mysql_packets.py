"""MySQL packets, server side, as the MySQL source documentation lays them out (page_protocol_basic_packets,
page_protocol_basic_ok_packet, page_protocol_basic_err_packet, page_protocol_com_query_response_text_resultset):
framing, length-encoded values, OK / ERR / EOF and a text result set. Used by the MySQL 8.4 stand-in."""
from __future__ import annotations

import socket
import ssl
import struct

UTF8MB4_0900_AI_CI = 255  # MySQL 8.0+'s default collation
SERVER_STATUS_AUTOCOMMIT = 0x0002
OK, ERR, EOF = b"\x00", b"\xff", b"\xfe"
MYSQL_TYPE_VAR_STRING = 0xFD


def lenenc_int(n: int) -> bytes:
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    if n < 1 << 24:
        return b"\xfd" + struct.pack("<I", n)[:3]
    return b"\xfe" + struct.pack("<Q", n)


def lenenc_str(value: bytes) -> bytes:
    return lenenc_int(len(value)) + value


def read_lenenc_int(data: bytes, at: int) -> tuple[int, int]:
    first = data[at]
    if first < 251:
        return first, at + 1
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
    return int.from_bytes(data[at + 1:at + 1 + width], "little"), at + 1 + width


def ok() -> bytes:
    """OK_Packet (CLIENT_PROTOCOL_41, no session tracking): header, affected rows, last insert id, status, warnings."""
    return OK + lenenc_int(0) + lenenc_int(0) + struct.pack("<HH", SERVER_STATUS_AUTOCOMMIT, 0)


def err(code: int, state: str, message: str) -> bytes:
    return ERR + struct.pack("<H", code) + b"#" + state.encode() + message.encode()


def eof() -> bytes:
    return EOF + struct.pack("<HH", 0, SERVER_STATUS_AUTOCOMMIT)


def result_set(columns: list[str], rows: list[list[str | None]]) -> list[bytes]:
    """Protocol::Text Resultset without CLIENT_DEPRECATE_EOF: column count, ColumnDefinition41s, EOF, rows, EOF."""
    packets = [lenenc_int(len(columns))]
    for name in columns:
        packets.append(lenenc_str(b"def") + lenenc_str(b"") + lenenc_str(b"") + lenenc_str(b"")
                       + lenenc_str(name.encode()) + lenenc_str(name.encode()) + b"\x0c"
                       + struct.pack("<HIBHB", UTF8MB4_0900_AI_CI, 1024, MYSQL_TYPE_VAR_STRING, 0, 0) + b"\0\0")
    packets.append(eof())
    for row in rows:
        packets.append(b"".join(b"\xfb" if v is None else lenenc_str(v.encode()) for v in row))
    packets.append(eof())
    return packets


class Wire:
    """MySQL packets: 3-byte little-endian length, 1-byte sequence id, payload (no packet above 16 MB here)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.seq = 0

    def send(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack("<I", len(payload))[:3] + bytes([self.seq]) + payload)
        self.seq = (self.seq + 1) % 256

    def receive(self) -> bytes:
        header = self._exactly(4)
        self.seq = (header[3] + 1) % 256
        return self._exactly(int.from_bytes(header[:3], "little"))

    def start_tls(self, context: ssl.SSLContext) -> None:
        self.sock = context.wrap_socket(self.sock, server_side=True)

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("client went away")
            data += chunk
        return data

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
