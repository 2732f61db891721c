"""A private MariaDB with binlog ROW/FULL on a loopback port, its data, config and logs under one folder."""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from cdc_assets.dbapi.connect import MysqlConnection
from cdc_assets.dev.processes import (START_TIMEOUT, STOP_TIMEOUT, request_shutdown, run, running, tail, terminate,
                                      wait_for)

DEV_USER = "cdc"
PASSWORD_FILE = "dev-password"  # beside the data: the server's login, made when its folder is first used


@dataclass
class MariaDbServer:
    base: Path
    port: int
    pid: int = 0
    user: str = DEV_USER
    password: str = field(default="", repr=False)  # test failures print reprs; empty: this folder's own
    # A replica needs its own server id and binlog names (failover tests); `options` are more my.cnf lines.
    server_id: int = 1
    binlog_basename: str = "mysql-bin"
    options: tuple[str, ...] = ()
    _process: subprocess.Popen | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.password:
            self.password = dev_password(self.base)

    @property
    def datadir(self) -> Path:
        return self.base / "data"

    @property
    def socket(self) -> Path:
        return self.base / "mysql.sock"

    @property
    def config_file(self) -> Path:
        return self.base / "my.cnf"

    @property
    def error_log(self) -> Path:
        return self.base / "mariadb.err"

    def url(self, database: str | None = None) -> str:
        return f"mysql://{self.user}:{self.password}@127.0.0.1:{self.port}" + (f"/{database}" if database else "")

    def public_url(self) -> str:
        return f"mysql://{self.user}@127.0.0.1:{self.port}"

    def connect(self, database: str | None = None) -> pymysql.connections.Connection:
        return MysqlConnection(host="127.0.0.1", port=self.port, user=self.user, password=self.password,
                               database=database, autocommit=True, charset="utf8mb4", local_infile=True)

    def create_database(self, name: str) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4")
        finally:
            conn.close()

    def start(self) -> MariaDbServer:
        """Start on `base`, initialising the data directory only if it has none (restarts keep the data)."""
        self.base.mkdir(parents=True, exist_ok=True)
        self._write_config()
        if not (self.datadir / "mysql").exists():
            run(["mariadb-install-db", f"--defaults-file={self.config_file}",
                  "--auth-root-authentication-method=normal", "--skip-test-db"], "mariadb-install-db")
        # Options mariadbd rejects are reported on stderr before the error log is opened.
        with open(self.base / "mariadbd.out", "wb") as out:
            self._process = subprocess.Popen(
                [shutil.which("mariadbd") or "/usr/sbin/mariadbd", f"--defaults-file={self.config_file}"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self._process.pid
        if not wait_for(lambda: self._process.poll() is not None or self.answers(), START_TIMEOUT) \
                or self._process.poll() is not None:
            self.stop()
            raise RuntimeError(f"mariadbd did not start on port {self.port}:\n"
                               f"{tail(self.base / 'mariadbd.out', 1000)}\n{tail(self.error_log)}")
        self.grant_dev_user()
        return self

    def _write_config(self) -> None:
        # Rewritten on every start: the port may have changed since the data directory was created.
        # Its own tmpdir: in /tmp, another program's clean-up removed the files of a running query's temp table.
        (self.base / "tmp").mkdir(exist_ok=True)
        server = [
            f"datadir={self.datadir}", f"tmpdir={self.base / 'tmp'}", f"port={self.port}", "bind-address=127.0.0.1", f"socket={self.socket}",
            f"pid-file={self.base / 'mariadb.pid'}", f"log-error={self.error_log}",
            f"log-bin={self.datadir / self.binlog_basename}", "binlog-format=ROW", "binlog-row-image=FULL",
            "binlog-row-metadata=FULL", f"server-id={self.server_id}", "character-set-server=utf8mb4",
            "collation-server=utf8mb4_unicode_ci", "innodb-buffer-pool-size=256M",
            "innodb-flush-log-at-trx-commit=2", "sync-binlog=0", "local-infile=1", "max-allowed-packet=256M",
            "skip-name-resolve", "explicit-defaults-for-timestamp=1", "default-time-zone=+00:00",
            "secure-file-priv=", "log-bin-trust-function-creators=1", *self.options,
        ]
        if os.geteuid() == 0:
            server.append("user=root")
        # [client] lets `mariadb --defaults-file=<base>/my.cnf` reach this server as root over the socket.
        client = [f"socket={self.socket}", f"port={self.port}", "user=root"]
        self.config_file.write_text("\n".join(["[mariadbd]", *server, "", "[client]", *client]) + "\n")

    def _admin(self, program: str, *args: str) -> list[str]:
        # --no-defaults keeps the machine's /etc/mysql client settings (and its server's socket) out of it.
        return [program, "--no-defaults", f"--socket={self.socket}", "-uroot", *args]

    def answers(self) -> bool:
        return subprocess.run(self._admin("mariadb-admin", "ping"), capture_output=True).returncode == 0

    def grant_dev_user(self) -> None:
        """The dev user with this folder's password (root over the socket needs none). Idempotent, on every start
        and reuse: a first start interrupted after install-db still ends with the user, and a folder from before
        generated passwords gets its own."""
        sql = "".join(
            f"CREATE USER IF NOT EXISTS '{self.user}'@'{host}' IDENTIFIED BY '{self.password}';"
            f"ALTER USER '{self.user}'@'{host}' IDENTIFIED BY '{self.password}';"
            f"GRANT ALL PRIVILEGES ON *.* TO '{self.user}'@'{host}' WITH GRANT OPTION;"
            for host in ("127.0.0.1", "localhost")
        )
        run(self._admin("mariadb"), "creating the MariaDB dev user", stdin=sql)  # not in the process list

    def stop(self) -> None:
        if running(self.pid, "mariadbd"):
            # SHUTDOWN returns at once, where `mariadb-admin shutdown` polls for the exit in whole seconds.
            asked = request_shutdown(self._admin("mariadb", "-e", "SHUTDOWN"))
            terminate(self.pid, "mariadbd", signal.SIGTERM, grace=STOP_TIMEOUT if asked else 0)
        if self._process is not None:
            self._process.wait()  # our child: reap it, else it lingers as a zombie


def dev_password(base: Path) -> str:
    """The login of the server in `base`: random, made once and kept (owner-only) in `base`, so a restarted server
    and every config written for it agree, and no password is written in the code."""
    path = base / PASSWORD_FILE
    if path.is_file():
        return path.read_text().strip()
    base.mkdir(parents=True, exist_ok=True)
    password = secrets.token_hex(12)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(password)
    return password
