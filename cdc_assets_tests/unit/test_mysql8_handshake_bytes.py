"""The MySQL 8.4 stand-in (cdc_assets_tests/mysql8_handshake.py) checked against bytes from outside it, so that the
login tests cannot pass on a protocol of our own making.

Test vectors: go-sql-driver/mysql auth_test.go (TestAuthFastCachingSHA256PasswordFullRSA): for the password
"secret" and the 20-byte scramble below, a client's caching_sha2_password reply is EXPECTED_REPLY; the server then
answers "perform full authentication" as the frame 02 00 00 02 01 04 and OK as 07 00 00 02 00 00 00 02 00 00 00
(there with sequence ids 2 and 4/6; the server status 0x0002 is SERVER_STATUS_AUTOCOMMIT)."""
import hashlib
import socket

from pymysql._auth import scramble_caching_sha2

from cdc_assets_tests.mysql8_handshake import (AUTH_MORE_DATA, CAPABILITIES, CLIENT_PLUGIN_AUTH, CLIENT_SSL,
                                               PERFORM_FULL_AUTHENTICATION, Mysql8Server, scramble_matches)
from cdc_assets_tests.mysql_packets import Wire, ok

SCRAMBLE = bytes([6, 81, 96, 114, 14, 42, 50, 30, 76, 47, 1, 95, 126, 81, 62, 94, 83, 80, 52, 85])
EXPECTED_REPLY = bytes([171, 201, 138, 146, 89, 159, 11, 170, 0, 67, 165, 49, 175, 94, 218, 68, 177, 109, 110, 86,
                        34, 33, 44, 190, 67, 240, 70, 110, 40, 139, 124, 41])
SECRET_SHA2_SHA2 = hashlib.sha256(hashlib.sha256(b"secret").digest()).digest()


def test_fast_auth_accepts_go_sql_drivers_reply_and_only_for_that_password():
    assert scramble_caching_sha2(b"secret", SCRAMBLE) == EXPECTED_REPLY  # PyMySQL agrees with go-sql-driver
    assert scramble_matches(EXPECTED_REPLY, SECRET_SHA2_SHA2, SCRAMBLE)
    other = hashlib.sha256(hashlib.sha256(b"Secret").digest()).digest()
    assert not scramble_matches(EXPECTED_REPLY, other, SCRAMBLE)
    assert not scramble_matches(EXPECTED_REPLY, SECRET_SHA2_SHA2, SCRAMBLE[::-1])


def test_frames_are_go_sql_drivers_bytes():
    server_end, client_end = socket.socketpair()
    try:
        wire = Wire(server_end)
        wire.seq = 2
        wire.send(AUTH_MORE_DATA + PERFORM_FULL_AUTHENTICATION)
        wire.seq = 2
        wire.send(ok())
        expected = bytes([2, 0, 0, 2, 1, 4]) + bytes([7, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0])
        received = b""
        while len(received) < len(expected):
            received += client_end.recv(64)
        assert received == expected
    finally:
        server_end.close()
        client_end.close()


def test_greeting_is_a_handshake_v10_announcing_caching_sha2_password():
    """Protocol::HandshakeV10 field by field (MySQL source documentation, "Connection Phase")."""
    with Mysql8Server("u", "p") as srv:
        greeting = srv._greeting(42, SCRAMBLE)
    assert greeting[0] == 10 and greeting[1:7] == b"8.4.3\0"
    assert int.from_bytes(greeting[7:11], "little") == 42 and greeting[11:19] == SCRAMBLE[:8] and greeting[19] == 0
    caps = int.from_bytes(greeting[20:22], "little") | int.from_bytes(greeting[25:27], "little") << 16
    assert caps == CAPABILITIES and caps & CLIENT_PLUGIN_AUTH and not caps & CLIENT_SSL
    assert greeting[22] == 255 and greeting[23:25] == b"\x02\x00"  # utf8mb4_0900_ai_ci, autocommit
    assert greeting[27] == 21 and greeting[28:38] == bytes(10)
    assert greeting[38:51] == SCRAMBLE[8:] + b"\0" and greeting[51:] == b"caching_sha2_password\0"
