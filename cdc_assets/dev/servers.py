"""Private MariaDB (binlog ROW/FULL) and PostgreSQL (wal_level=logical) servers on free loopback ports.

For tests, the demo and benchmarks: never the machine's shared services, whose settings we do not own.
`python -m cdc_assets.dev.servers start|stop|status DIR` runs them by hand; `servers.json` in DIR lets a
later process attach to servers that are still running.
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg2
import pymysql

DEV_USER, DEV_PASSWORD = "cdc", "cdc"  # throwaway servers on loopback only
STATE_FILE = "servers.json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _wait(check, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
    raise RuntimeError(f"{what} did not start within {timeout:.0f} s; log tail:\n{tail}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


@dataclass
class MariaDbServer:
    base: Path
    port: int
    pid: int = 0
    user: str = DEV_USER
    password: str = DEV_PASSWORD

    @property
    def socket(self) -> Path:
        return self.base / "mysql.sock"

    def url(self, database: str | None = None) -> str:
        return f"mysql://{self.user}:{self.password}@127.0.0.1:{self.port}" + (f"/{database}" if database else "")

    def connect(self, database: str | None = None):
        return pymysql.connect(host="127.0.0.1", port=self.port, user=self.user, password=self.password,
                               database=database, autocommit=True, charset="utf8mb4", local_infile=True)

    def create_database(self, name: str) -> None:
        conn = self.connect()
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4")
        conn.close()

    def _config(self) -> Path:
        data = self.base / "data"
        lines = [
            "[mariadbd]", f"datadir={data}", f"port={self.port}", "bind-address=127.0.0.1", f"socket={self.socket}",
            f"pid-file={self.base / 'mariadb.pid'}", f"log-error={self.base / 'mariadb.err'}",
            f"log-bin={data / 'mysql-bin'}", "binlog-format=ROW", "binlog-row-image=FULL", "binlog-row-metadata=FULL",
            "server-id=1", "character-set-server=utf8mb4", "collation-server=utf8mb4_unicode_ci",
            "innodb-buffer-pool-size=512M", "innodb-flush-log-at-trx-commit=2", "sync-binlog=0", "local-infile=1",
            "max-allowed-packet=256M", "skip-name-resolve", "explicit-defaults-for-timestamp=1",
            "default-time-zone=+00:00", "secure-file-priv=", "log-bin-trust-function-creators=1",
        ]
        if os.geteuid() == 0:
            lines.append("user=root")
        path = self.base / "my.cnf"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self) -> "MariaDbServer":
        self.base.mkdir(parents=True, exist_ok=True)
        cnf = self._config()
        fresh = not (self.base / "data" / "mysql").exists()
        if fresh:
            subprocess.run(["mariadb-install-db", f"--defaults-file={cnf}", "--auth-root-authentication-method=normal",
                            "--skip-test-db"], check=True, capture_output=True)
        proc = subprocess.Popen([shutil.which("mariadbd") or "/usr/sbin/mariadbd", f"--defaults-file={cnf}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.pid = proc.pid
        _wait(self._pings, 60, "mariadbd", self.base / "mariadb.err")
        if fresh:
            self._create_user()
        return self

    def _pings(self) -> bool:
        return subprocess.run(["mariadb-admin", f"--socket={self.socket}", "-uroot", "ping"],
                              capture_output=True).returncode == 0

    def _create_user(self) -> None:
        sql = "".join(
            f"CREATE USER IF NOT EXISTS '{self.user}'@'{host}' IDENTIFIED BY '{self.password}';"
            f"GRANT ALL PRIVILEGES ON *.* TO '{self.user}'@'{host}' WITH GRANT OPTION;"
            for host in ("127.0.0.1", "localhost")
        )
        subprocess.run(["mariadb", f"--socket={self.socket}", "-uroot", "-e", sql], check=True, capture_output=True)

    def stop(self) -> None:
        subprocess.run(["mariadb-admin", f"--socket={self.socket}", "-uroot", "shutdown"], capture_output=True)
        _stop_pid(self.pid)


@dataclass
class PostgresServer:
    base: Path
    port: int
    pid: int = 0
    user: str = "postgres"
    overrides: tuple[tuple[str, str], ...] = ()  # postgresql.conf settings that differ from ours

    @property
    def data(self) -> Path:
        return self.base / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres"):
        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user, dbname=database)
        conn.autocommit = True
        return conn

    def create_database(self, name: str) -> None:
        conn = self.connect()
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if cur.fetchone() is None:
                cur.execute(f'CREATE DATABASE "{name}"')
        conn.close()

    def _as_postgres(self, args: list[str]) -> list[str]:
        # initdb and postgres refuse to run as root.
        return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args

    def start(self) -> "PostgresServer":
        bindir = _pg_bindir()
        self.base.mkdir(parents=True, exist_ok=True)
        log = self.base / "postgres.log"
        if os.geteuid() == 0:
            _ensure_os_user("postgres")
            os.chmod(self.base, 0o755)
            _traversable(self.base)
            log.touch()
            shutil.chown(log, "postgres", "postgres")
            shutil.chown(self.base, "postgres", "postgres")
        if not (self.data / "PG_VERSION").exists():
            subprocess.run(self._as_postgres([str(bindir / "initdb"), "-D", str(self.data), "-U", self.user,
                                              "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8"]),
                           check=True, capture_output=True)
        self._configure()
        subprocess.run(self._as_postgres([str(bindir / "pg_ctl"), "-D", str(self.data), "-l", str(log), "-w",
                                          "-t", "60", "start"]), check=True, capture_output=True)
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])
        _wait(self._answers, 30, "postgres", log)
        return self

    def _configure(self) -> None:
        settings = {
            "listen_addresses": "'127.0.0.1'", "port": str(self.port), "unix_socket_directories": f"'{self.base}'",
            "wal_level": "logical", "max_replication_slots": "20", "max_wal_senders": "20", "max_wal_size": "2GB",
            "shared_buffers": "256MB", "synchronous_commit": "on", "fsync": "off", "full_page_writes": "off",
            "wal_sender_timeout": "0", "timezone": "'UTC'", "max_connections": "100", **dict(self.overrides),
        }
        (self.data / "postgresql.auto.conf").write_text("".join(f"{k} = {v}\n" for k, v in settings.items()))
        (self.data / "pg_hba.conf").write_text(
            "local all all trust\nlocal replication all trust\n"
            "host all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n"
            "host all all ::1/128 trust\nhost replication all ::1/128 trust\n")

    def _answers(self) -> bool:
        try:
            self.connect().close()
            return True
        except psycopg2.OperationalError:
            return False

    def stop(self) -> None:
        subprocess.run(self._as_postgres([str(_pg_bindir() / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                                          "stop"]), capture_output=True)
        _stop_pid(self.pid)


def _pg_bindir() -> Path:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if not versions:
        raise RuntimeError("PostgreSQL server binaries not found: run scripts/install-deps.sh")
    return versions[-1].parent


def _ensure_os_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-r", "-M", name], check=True)


def _traversable(path: Path) -> None:
    """The postgres OS user must reach its data dir: open up (o+x) every parent we own."""
    for parent in path.resolve().parents:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            os.chmod(parent, mode | 0o001)


def _stop_pid(pid: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while pid and _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid and _alive(pid):
        os.kill(pid, signal.SIGKILL)


def start_servers(base: Path) -> tuple[MariaDbServer, PostgresServer]:
    """Start both under `base` (data kept across restarts); reuse running ones recorded in servers.json."""
    running = attach(base)
    if running:
        return running
    old = _read_state(base)
    ports = [old.get(k, {}).get("port") if old else None for k in ("mariadb", "postgres")]
    ports = [p if p and _port_free(p) else free_port() for p in ports]
    mariadb = MariaDbServer(base / "mariadb", ports[0]).start()
    postgres = PostgresServer(base / "postgres", ports[1]).start()
    state = {"mariadb": {"port": mariadb.port, "pid": mariadb.pid}, "postgres": {"port": postgres.port, "pid": postgres.pid}}
    (base / STATE_FILE).write_text(json.dumps(state, indent=1))
    return mariadb, postgres


def _read_state(base: Path) -> dict | None:
    path = base / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else None


def attach(base: Path) -> tuple[MariaDbServer, PostgresServer] | None:
    state = _read_state(base)
    if not state:
        return None
    mariadb = MariaDbServer(base / "mariadb", state["mariadb"]["port"], state["mariadb"]["pid"])
    postgres = PostgresServer(base / "postgres", state["postgres"]["port"], state["postgres"]["pid"])
    if not (_alive(mariadb.pid) and _alive(postgres.pid) and mariadb._pings() and postgres._answers()):
        return None
    return mariadb, postgres


def stop_servers(base: Path) -> None:
    state = _read_state(base)
    if not state:
        return
    MariaDbServer(base / "mariadb", state["mariadb"]["port"], state["mariadb"]["pid"]).stop()
    PostgresServer(base / "postgres", state["postgres"]["port"], state["postgres"]["pid"]).stop()
    (base / STATE_FILE).unlink()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop", "status"):
        print("usage: python -m cdc_assets.dev.servers start|stop|status DIR", file=sys.stderr)
        return 2
    base = Path(argv[1]).resolve()
    if argv[0] == "start":
        mariadb, postgres = start_servers(base)
        print(f"mariadb 127.0.0.1:{mariadb.port} (user {mariadb.user}), postgres 127.0.0.1:{postgres.port} (user postgres)")
    elif argv[0] == "stop":
        stop_servers(base)
        print("stopped")
    else:
        running = attach(base)
        print("not running" if running is None else
              f"mariadb 127.0.0.1:{running[0].port}, postgres 127.0.0.1:{running[1].port}")
        return 0 if running else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
