"""A stand-in MySQL 8.4 server for one caching_sha2_password account: the connection phase exactly as MySQL 8.4
speaks it, then just enough of the command phase for our three clients to finish logging in.

MariaDB 10.11, the only server here, has no caching_sha2_password. This speaks its wire protocol from the
documentation and the server's source:
- MySQL source documentation, "Connection Phase" / Protocol::HandshakeV10, Protocol::HandshakeResponse41,
  Protocol::SSLRequest, Protocol::AuthSwitchRequest, Protocol::AuthMoreData, OK_Packet, ERR_Packet
  (dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase.html);
- "caching_sha2_password information" (page_caching_sha2_authentication_exchanges.html) for the exchange;
- mysql-server sql/auth/sha2_password.cc `caching_sha2_password_authenticate` (fast_auth_success = 3,
  perform_full_authentication = 4, request_public_key = 2, RSA_PKCS1_OAEP_PADDING, the XOR with the scramble)
  and sql/auth/sql_authentication.cc (`send_server_handshake_packet`, `send_plugin_request_packet`: a client
  naming another plugin gets an AuthSwitchRequest with the same scramble; `server_mpvio_write_packet` prefixes
  a plugin's data with 0x01, which is what makes it an AuthMoreData packet).

What it leaves out is said where it is left out: capabilities a client would then use (compression, session
tracking, DEPRECATE_EOF, query attributes) are not offered, and the command phase answers only SET, SHOW VARIABLES
LIKE, SELECT @@variables, ping, quit and a binlog dump that ends at once.
"""
from __future__ import annotations

import hashlib
import os
import re
import socket
import ssl
import struct
import threading
from dataclasses import dataclass, field

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from cdc_assets_tests.certificates import tls_files
from cdc_assets_tests.mysql_packets import (EOF, SERVER_STATUS_AUTOCOMMIT, UTF8MB4_0900_AI_CI, Wire, err, ok,
                                            read_lenenc_int, result_set)

__all__ = ["Mysql8Server", "Login", "tls_files", "scramble_matches"]

SERVER_VERSION = b"8.4.3"
PLUGIN = b"caching_sha2_password"
SCRAMBLE_LENGTH = 20  # auth-plugin-data: part 1 (8 bytes) + part 2 (12 bytes, then a NUL)

# Capability flags (include/mysql_com.h).
CLIENT_LONG_PASSWORD = 1
CLIENT_FOUND_ROWS = 1 << 1
CLIENT_LONG_FLAG = 1 << 2
CLIENT_CONNECT_WITH_DB = 1 << 3
CLIENT_NO_SCHEMA = 1 << 4
CLIENT_ODBC = 1 << 6
CLIENT_LOCAL_FILES = 1 << 7
CLIENT_IGNORE_SPACE = 1 << 8
CLIENT_PROTOCOL_41 = 1 << 9
CLIENT_INTERACTIVE = 1 << 10
CLIENT_SSL = 1 << 11
CLIENT_IGNORE_SIGPIPE = 1 << 12
CLIENT_TRANSACTIONS = 1 << 13
CLIENT_RESERVED2 = 1 << 15  # formerly CLIENT_SECURE_CONNECTION: 4.1 authentication
CLIENT_MULTI_STATEMENTS = 1 << 16
CLIENT_MULTI_RESULTS = 1 << 17
CLIENT_PS_MULTI_RESULTS = 1 << 18
CLIENT_PLUGIN_AUTH = 1 << 19
CLIENT_CONNECT_ATTRS = 1 << 20
CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA = 1 << 21
CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS = 1 << 22
# A MySQL 8.4 server offers all of CLIENT_COMPRESS, SESSION_TRACK, DEPRECATE_EOF, OPTIONAL_RESULTSET_METADATA,
# ZSTD_COMPRESSION, QUERY_ATTRIBUTES and MULTI_FACTOR_AUTHENTICATION too; they change the command phase (or add
# auth factors) and this stand-in does not implement them, so it does not offer them.
CAPABILITIES = (CLIENT_LONG_PASSWORD | CLIENT_FOUND_ROWS | CLIENT_LONG_FLAG | CLIENT_CONNECT_WITH_DB
                | CLIENT_NO_SCHEMA | CLIENT_ODBC | CLIENT_LOCAL_FILES | CLIENT_IGNORE_SPACE | CLIENT_PROTOCOL_41
                | CLIENT_INTERACTIVE | CLIENT_IGNORE_SIGPIPE | CLIENT_TRANSACTIONS | CLIENT_RESERVED2
                | CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS | CLIENT_PS_MULTI_RESULTS | CLIENT_PLUGIN_AUTH
                | CLIENT_CONNECT_ATTRS | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA | CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS)

# caching_sha2_password's one-byte messages (sql/auth/sha2_password.cc), sent inside AuthMoreData (0x01 ...).
AUTH_MORE_DATA = b"\x01"
REQUEST_PUBLIC_KEY = b"\x02"
FAST_AUTH_SUCCESS = b"\x03"
PERFORM_FULL_AUTHENTICATION = b"\x04"
AUTH_SWITCH_REQUEST = b"\xfe"

ER_ACCESS_DENIED_ERROR = 1045
ER_NOT_SUPPORTED_YET = 1235
COM_QUIT, COM_INIT_DB, COM_QUERY, COM_PING, COM_BINLOG_DUMP, COM_REGISTER_SLAVE = 0x01, 0x02, 0x03, 0x0E, 0x12, 0x15

# What the clients ask after login (Connector/J: @@max_allowed_packet, @@system_time_zone, @@time_zone,
# @@auto_increment_increment; pymysqlreplication: binlog_checksum, binlog_row_metadata), as a MySQL 8.4 server
# with binlog_checksum=NONE answers.
VARIABLES = {
    "max_allowed_packet": "67108864", "system_time_zone": "UTC", "time_zone": "SYSTEM",
    "auto_increment_increment": "1", "binlog_checksum": "NONE", "binlog_row_metadata": "FULL",
    "version": SERVER_VERSION.decode(), "version_comment": "MySQL Community Server - GPL", "tx_isolation": None,
    "transaction_isolation": "REPEATABLE-READ", "session.transaction_isolation": "REPEATABLE-READ",
    "session.transaction_read_only": "0", "transaction_read_only": "0", "lower_case_table_names": "0",
    "wait_timeout": "28800", "sql_mode": "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION", "character_set_client": "utf8mb4",
}


def scramble_matches(reply: bytes, password_sha2_sha2: bytes, scramble: bytes) -> bool:
    """Fast authentication (sha2_password.cc `Caching_sha2_password::fast_authenticate`, with the digest
    validation of `validate_sha256_scramble`): the client sent XOR(SHA256(pw), SHA256(SHA256(SHA256(pw)), scramble));
    the server holds SHA256(SHA256(pw)) in its cache."""
    mask = hashlib.sha256(password_sha2_sha2 + scramble).digest()
    stage1 = bytes(a ^ b for a, b in zip(reply, mask))
    return hashlib.sha256(stage1).digest() == password_sha2_sha2


def rsa_key_pair() -> tuple[rsa.RSAPrivateKey, bytes]:
    """A fresh 2048-bit key (MySQL 8.4 generates its caching_sha2 keys with 2048 bits) and its public PEM as the
    server sends it (SubjectPublicKeyInfo, "-----BEGIN PUBLIC KEY-----")."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return key, pem


@dataclass
class Login:
    """How one connection logged in, for tests to assert the path taken."""

    user: str = ""
    client_plugin: str = ""
    switched: bool = False
    tls: bool = False
    fast_auth: bool = False
    public_key_sent: bool = False
    full_auth: bool = False
    accepted: bool = False
    queries: list[str] = field(default_factory=list)


class Mysql8Server:
    """Accepts connections on 127.0.0.1:`port` in threads until `close()`. `tls`: a server SSLContext, offered
    as CLIENT_SSL. Logged-in accounts are cached, as the server's caching_sha2 cache does, so a second login of the
    same account takes the fast path unless `cache=False`."""

    def __init__(self, user: str, password: str, *, tls: ssl.SSLContext | None = None, cache: bool = True,
                 answers: dict[str, tuple[list[str], list[list[str]]]] | None = None) -> None:
        self.user, self.password = user, password
        self.answers = answers or {}  # a query holding this text -> (columns, rows)
        self.private_key, self.public_pem = rsa_key_pair()
        self.tls, self.cache = tls, cache
        self.cached: set[str] = set()
        self.logins: list[Login] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def __enter__(self) -> "Mysql8Server":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def _serve(self) -> None:
        next_id = 8
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            next_id += 1
            threading.Thread(target=self._session, args=(conn, next_id), daemon=True).start()

    def _session(self, conn: socket.socket, connection_id: int) -> None:
        wire = Wire(conn)
        login = Login()
        self.logins.append(login)
        try:
            if self._connection_phase(wire, login, connection_id):
                self._command_phase(wire, login)
        except (ConnectionError, OSError):  # the client hung up, or refused our certificate
            pass
        finally:
            wire.close()

    # ---- connection phase -------------------------------------------------------------------------------------

    def _greeting(self, connection_id: int, scramble: bytes) -> bytes:
        """Protocol::HandshakeV10: protocol 10, version NUL, thread id, scramble part 1, filler, capabilities low,
        collation, status, capabilities high, auth data length (21), 10 reserved zero bytes, scramble part 2 + NUL,
        plugin name + NUL."""
        caps = CAPABILITIES | (CLIENT_SSL if self.tls else 0)
        return (b"\x0a" + SERVER_VERSION + b"\0" + struct.pack("<I", connection_id) + scramble[:8] + b"\0"
                + struct.pack("<H", caps & 0xFFFF) + bytes([UTF8MB4_0900_AI_CI]) + struct.pack("<H", SERVER_STATUS_AUTOCOMMIT)
                + struct.pack("<H", caps >> 16) + bytes([SCRAMBLE_LENGTH + 1]) + b"\0" * 10
                + scramble[8:] + b"\0" + PLUGIN + b"\0")

    def _connection_phase(self, wire: Wire, login: Login, connection_id: int) -> bool:
        # The scramble's bytes are printable and never NUL, as generate_user_salt() makes them.
        scramble = bytes(b % 94 + 33 for b in os.urandom(SCRAMBLE_LENGTH))
        wire.send(self._greeting(connection_id, scramble))
        response = wire.receive()
        caps = struct.unpack_from("<I", response)[0]
        if caps & CLIENT_SSL and len(response) == 32:  # Protocol::SSLRequest: the first 32 bytes, then TLS
            if self.tls is None:
                return False
            wire.start_tls(self.tls)
            login.tls = True
            response = wire.receive()
        user, auth, plugin = _parse_handshake_response(response, caps)
        login.user, login.client_plugin = user, plugin
        if plugin != PLUGIN.decode():  # the client guessed another plugin: switch it, same scramble
            login.switched = True
            wire.send(AUTH_SWITCH_REQUEST + PLUGIN + b"\0" + scramble + b"\0")
            auth = wire.receive()
        known = user == self.user
        if not auth:  # an empty reply means "no password"
            return self._refuse(wire, login, user, using_password=False)
        digest2 = hashlib.sha256(hashlib.sha256(self.password.encode()).digest()).digest()
        if known and user in self.cached and scramble_matches(auth, digest2, scramble):
            login.fast_auth = True
            wire.send(AUTH_MORE_DATA + FAST_AUTH_SUCCESS)
            return self._accept(wire, login)
        login.full_auth = True
        wire.send(AUTH_MORE_DATA + PERFORM_FULL_AUTHENTICATION)
        reply = wire.receive()
        if not login.tls:
            if reply == REQUEST_PUBLIC_KEY:
                login.public_key_sent = True
                wire.send(AUTH_MORE_DATA + self.public_pem)
                reply = wire.receive()
            try:
                plain = self.private_key.decrypt(reply, padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()),
                                                                     algorithm=hashes.SHA1(), label=None))
            except ValueError:
                return self._refuse(wire, login, user)
            # The client XORed password + NUL with the scramble, repeated (sha2_password.cc xor_string).
            reply = bytes(b ^ scramble[i % SCRAMBLE_LENGTH] for i, b in enumerate(plain))
        if known and reply == self.password.encode() + b"\0":
            if self.cache:
                self.cached.add(user)
            return self._accept(wire, login)
        return self._refuse(wire, login, user)

    def _accept(self, wire: Wire, login: Login) -> bool:
        login.accepted = True
        wire.send(ok())
        return True

    def _refuse(self, wire: Wire, login: Login, user: str, using_password: bool = True) -> bool:
        message = f"Access denied for user '{user}'@'localhost' (using password: {'YES' if using_password else 'NO'})"
        wire.send(err(ER_ACCESS_DENIED_ERROR, "28000", message))
        return False

    # ---- command phase ----------------------------------------------------------------------------------------

    def _command_phase(self, wire: Wire, login: Login) -> None:
        while True:
            wire.seq = 0
            packet = wire.receive()
            command, body = packet[0], packet[1:]
            if command == COM_QUIT:
                return
            if command in (COM_PING, COM_INIT_DB, COM_REGISTER_SLAVE):
                wire.send(ok())
            elif command == COM_BINLOG_DUMP:
                wire.send(EOF + b"\0\0\0\0")  # a BINLOG_DUMP_NON_BLOCK dump at the end of the log
            elif command == COM_QUERY:
                query = body.decode(errors="replace")
                login.queries.append(query)
                for packet in _answer(query, self.answers):
                    wire.send(packet)
            else:
                wire.send(err(ER_NOT_SUPPORTED_YET, "42000", f"command {command} is not answered by this stand-in"))


def _parse_handshake_response(data: bytes, caps: int) -> tuple[str, bytes, str]:
    """Protocol::HandshakeResponse41 -> (user, auth response, client plugin name)."""
    at = 32  # capabilities 4, max packet 4, collation 1, filler 23
    end = data.index(b"\0", at)
    user = data[at:end].decode()
    at = end + 1
    if caps & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA:
        length, at = read_lenenc_int(data, at)
    else:
        length, at = data[at], at + 1
    auth = data[at:at + length]
    at += length
    if caps & CLIENT_CONNECT_WITH_DB and at < len(data):
        at = data.index(b"\0", at) + 1
    plugin = ""
    if caps & CLIENT_PLUGIN_AUTH and at < len(data):
        end = data.index(b"\0", at)
        plugin = data[at:end].decode()
    return user, auth, plugin


_SHOW_LIKE = re.compile(r"SHOW\s+(?:GLOBAL\s+|SESSION\s+)?VARIABLES\s+LIKE\s+'([^']*)'", re.I)
_SELECT_VARS = re.compile(r"SELECT\s+(@@.+?)\s*;?\s*$", re.I | re.S)


def _answer(query: str, answers: dict[str, tuple[list[str], list[list[str]]]]) -> list[bytes]:
    text = query.strip()
    for needle, (columns, rows) in answers.items():
        if needle in text:
            return result_set(columns, rows)
    if re.match(r"SET\b", text, re.I):
        return [ok()]
    if m := _SHOW_LIKE.match(text):
        name = m.group(1).lower()
        rows = [[name, VARIABLES[name]]] if name in VARIABLES else []
        return result_set(["Variable_name", "Value"], rows)
    if m := _SELECT_VARS.match(text):
        names = [n.strip() for n in m.group(1).split(",")]
        return result_set(names, [[VARIABLES.get(n.lstrip("@").lower().removeprefix("global.")) for n in names]])
    return [err(1064, "42000", f"this stand-in answers only SET, SHOW VARIABLES LIKE and SELECT @@...: {text[:60]}")]
