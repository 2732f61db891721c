"""The private servers are configured for change capture, and survive a crash with their data."""
import json
import os
import shutil
import signal
import socket
import tempfile
from pathlib import Path

import pytest

from cdc_assets.dev.servers import attach, start_servers, stop_servers


def query_one(conn, sql: str, params=None) -> tuple:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone()


def test_mariadb_writes_full_row_binlog(servers):
    conn = servers.mariadb.connect()
    try:
        settings = query_one(conn, "SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata")
        log_file, position = query_one(conn, "SHOW MASTER STATUS")[:2]
    finally:
        conn.close()
    assert settings == (1, "ROW", "FULL", "FULL")
    assert log_file.startswith("mysql-bin.")
    assert position > 0


def test_postgres_can_decode_logically(servers, unique_name):
    conn = servers.postgres.connect()
    try:
        assert query_one(conn, "SHOW wal_level") == ("logical",)
        query_one(conn, "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (unique_name,))
        try:
            assert query_one(conn, "SELECT plugin FROM pg_replication_slots WHERE slot_name = %s",
                             (unique_name,)) == ("pgoutput",)
        finally:
            query_one(conn, "SELECT pg_drop_replication_slot(%s)", (unique_name,))
    finally:
        conn.close()


def test_create_database_is_idempotent(servers, unique_name):
    for server in (servers.mariadb, servers.postgres):
        server.create_database(unique_name)
        server.create_database(unique_name)
        server.connect(unique_name).close()
    conn = servers.mariadb.connect()
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE `{unique_name}`")
    conn.close()


def test_attach_finds_the_running_servers(servers):
    mariadb, postgres = attach(servers.base_dir)
    assert (mariadb.port, postgres.port) == (servers.mariadb.port, servers.postgres.port)


def test_password_stays_out_of_reprs_and_state(servers):
    assert "password" not in repr(servers.mariadb)
    state = json.loads((servers.base_dir / "servers.json").read_text())
    assert state["mariadb"]["url"] == f"mysql://cdc@127.0.0.1:{servers.mariadb.port}"


@pytest.fixture
def scratch_dir():
    base_dir = Path(tempfile.mkdtemp(prefix="cdc-test-restart-"))
    yield base_dir
    stop_servers(base_dir)
    shutil.rmtree(base_dir, ignore_errors=True)


def crash(pid: int) -> None:
    """Kill the server and its children, as a power cut would; both lead their own process group."""
    os.killpg(pid, signal.SIGKILL)
    try:
        os.waitpid(pid, 0)  # mariadbd is our child: reap it
    except ChildProcessError:
        pass


def test_restart_after_crash_keeps_data_and_moves_off_a_taken_port(scratch_dir, unique_name):
    mariadb, postgres = start_servers(scratch_dir)
    mariadb.create_database(unique_name)
    postgres.create_database(unique_name)
    crash(mariadb.pid)
    crash(postgres.pid)
    assert attach(scratch_dir) is None

    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the crash left TIME_WAIT sockets
        squatter.bind(("127.0.0.1", mariadb.port))
        squatter.listen()
        mariadb2, postgres2 = start_servers(scratch_dir)

    assert mariadb2.port != mariadb.port
    mariadb2.connect(unique_name).close()
    postgres2.connect(unique_name).close()
    assert attach(scratch_dir) is not None
