"""Private MariaDB (binlog ROW/FULL) and PostgreSQL (wal_level=logical) servers on free loopback ports.

For tests, the demo and benchmarks: never the machine's shared services, whose settings we do not own.
`python -m cdc_assets.dev.servers start|stop|status DIR` runs them by hand; `servers.json` in DIR lets a
later process attach to servers that are still running, and a restart reuses the data left in DIR.
"""
from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import psycopg2
import pymysql

DEV_USER, DEV_PASSWORD = "cdc", "cdc"  # throwaway servers on loopback only
STATE_FILE = "servers.json"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        # Same flag the servers use, so a port left in TIME_WAIT by our previous run still counts as free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else f"({path} does not exist)"


def _run(args: list[str], what: str, timeout: float = START_TIMEOUT) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")


def _running(pid: int, command: str) -> bool:
    """Is `pid` a live (not zombie) `command` process? The name check keeps a recycled pid from being
    mistaken for our server, or killed as one."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    state = stat[stat.rindex(")") + 2]
    return name == command and state not in "ZX"


def _wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _request_shutdown(args: list[str]) -> bool:
    """Run a shutdown command; False when it failed or hung."""
    try:
        return subprocess.run(args, capture_output=True, timeout=STOP_TIMEOUT).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _terminate(pid: int, command: str, polite: signal.Signals, grace: float) -> None:
    """Give `pid` `grace` seconds to finish a requested shutdown, then send `polite`, then SIGKILL."""
    for sig, wait in ((None, grace), (polite, 10.0), (signal.SIGKILL, 10.0)):
        if sig is not None and _running(pid, command):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
        if _wait_for(lambda: not _running(pid, command), wait):
            return
    raise RuntimeError(f"{command} pid {pid} survived SIGKILL")


@dataclass
class MariaDbServer:
    base: Path
    port: int
    pid: int = 0
    user: str = DEV_USER
    password: str = field(default=DEV_PASSWORD, repr=False)  # test failures print reprs
    # A replica needs its own server id and binlog names (failover tests); `options` are more my.cnf lines.
    server_id: int = 1
    binlog_basename: str = "mysql-bin"
    options: tuple[str, ...] = ()
    _process: subprocess.Popen | None = field(default=None, init=False, repr=False, compare=False)

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
        return pymysql.connect(host="127.0.0.1", port=self.port, user=self.user, password=self.password,
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
            _run(["mariadb-install-db", f"--defaults-file={self.config_file}",
                  "--auth-root-authentication-method=normal", "--skip-test-db"], "mariadb-install-db")
        # Options mariadbd rejects are reported on stderr before the error log is opened.
        with open(self.base / "mariadbd.out", "wb") as out:
            self._process = subprocess.Popen(
                [shutil.which("mariadbd") or "/usr/sbin/mariadbd", f"--defaults-file={self.config_file}"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self._process.pid
        if not _wait_for(lambda: self._process.poll() is not None or self.answers(), START_TIMEOUT) \
                or self._process.poll() is not None:
            self.stop()
            raise RuntimeError(f"mariadbd did not start on port {self.port}:\n"
                               f"{_tail(self.base / 'mariadbd.out', 1000)}\n{_tail(self.error_log)}")
        self._grant_dev_user()
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

    def _grant_dev_user(self) -> None:
        # Idempotent on every start, so a first start interrupted after install-db still ends with the user.
        sql = "".join(
            f"CREATE USER IF NOT EXISTS '{self.user}'@'{host}' IDENTIFIED BY '{self.password}';"
            f"GRANT ALL PRIVILEGES ON *.* TO '{self.user}'@'{host}' WITH GRANT OPTION;"
            for host in ("127.0.0.1", "localhost")
        )
        _run(self._admin("mariadb", "-e", sql), "creating the MariaDB dev user")

    def stop(self) -> None:
        if _running(self.pid, "mariadbd"):
            # SHUTDOWN returns at once, where `mariadb-admin shutdown` polls for the exit in whole seconds.
            asked = _request_shutdown(self._admin("mariadb", "-e", "SHUTDOWN"))
            _terminate(self.pid, "mariadbd", signal.SIGTERM, grace=STOP_TIMEOUT if asked else 0)
        if self._process is not None:
            self._process.wait()  # our child: reap it, else it lingers as a zombie


@dataclass
class PostgresServer:
    base: Path
    port: int
    pid: int = 0
    user: str = "postgres"
    overrides: tuple[tuple[str, str], ...] = ()  # postgresql.conf settings that differ from ours

    @property
    def datadir(self) -> Path:
        return self.base / "data"

    @property
    def log_file(self) -> Path:
        return self.base / "postgres.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def public_url(self) -> str:
        return self.url()

    def connect(self, database: str = "postgres") -> psycopg2.extensions.connection:
        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user, dbname=database)
        conn.autocommit = True
        return conn

    def create_database(self, name: str) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if cur.fetchone() is None:
                    cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()

    def start(self) -> PostgresServer:
        """Start on `base` (which the postgres OS user must be able to reach), running initdb only if the
        data directory is new (restarts keep the data)."""
        self.base.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            self._hand_to_postgres_user()
        bindir = _pg_bindir()
        if not (self.datadir / "PG_VERSION").exists():
            _run(self._as_postgres(str(bindir / "initdb"), "-D", str(self.datadir), "-U", self.user,
                                   "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8",
                                   "--no-sync"), "initdb")  # throwaway data: fsync is off on the server too
        self._configure()
        self._await_dead_postmaster()
        try:
            _run(self._as_postgres(str(bindir / "pg_ctl"), "-D", str(self.datadir), "-l", str(self.log_file),
                                   "-w", "-t", str(int(START_TIMEOUT)), "start"), f"pg_ctl start on port {self.port}")
        except RuntimeError as err:
            raise RuntimeError(f"{err}\n{_tail(self.log_file)}") from None
        self.pid = int((self.datadir / "postmaster.pid").read_text().split()[0])
        if not self.answers():  # e.g. a port set by ALTER SYSTEM overrides ours
            self.stop()
            raise RuntimeError(f"PostgreSQL in {self.datadir} started but does not answer on port {self.port}")
        return self

    def _await_dead_postmaster(self) -> None:
        """PostgreSQL will not start while the pid in a stale postmaster.pid exists, and a crashed postmaster
        (not our child) can linger as a zombie until init reaps it, about a second here."""
        lock = self.datadir / "postmaster.pid"
        words = lock.read_text().split() if lock.exists() else []
        if words and not _running(int(words[0]), "postgres"):
            _wait_for(lambda: not Path(f"/proc/{words[0]}").exists(), 10)

    def _hand_to_postgres_user(self) -> None:
        # initdb and postgres refuse to run as root; as root we run them as the OS user postgres.
        _ensure_os_user("postgres")
        self.base.chmod(0o755)
        shutil.chown(self.base, "postgres", "postgres")
        self.log_file.touch()  # pg_ctl, running as postgres, cannot create it in a root-owned place
        shutil.chown(self.log_file, "postgres", "postgres")

    def _as_postgres(self, *args: str) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else list(args)

    def _configure(self) -> None:
        # Our settings go to an included file rewritten on every start (the port may change), placed before
        # postgresql.auto.conf so ALTER SYSTEM still wins.
        settings = {
            "listen_addresses": "'127.0.0.1'", "port": str(self.port), "unix_socket_directories": f"'{self.base}'",
            "wal_level": "logical", "max_replication_slots": "20", "max_wal_senders": "20", "max_wal_size": "2GB",
            "shared_buffers": "256MB", "synchronous_commit": "on", "fsync": "off", "full_page_writes": "off",
            "wal_sender_timeout": "0", "timezone": "'UTC'", "max_connections": "100", **dict(self.overrides),
        }
        include = "include_if_exists = 'cdc_dev.conf'\n"
        main_conf = self.datadir / "postgresql.conf"
        if include not in main_conf.read_text():
            with main_conf.open("a") as f:
                f.write(include)
        (self.datadir / "cdc_dev.conf").write_text("".join(f"{k} = {v}\n" for k, v in settings.items()))
        (self.datadir / "pg_hba.conf").write_text("".join(
            f"{kind} {db} all {addr} trust\n"
            for kind, addr in (("local", ""), ("host", "127.0.0.1/32"), ("host", "::1/128"))
            for db in ("all", "replication")))

    def answers(self) -> bool:
        try:
            self.connect().close()
            return True
        except psycopg2.OperationalError:
            return False

    def stop(self) -> None:
        if not _running(self.pid, "postgres"):
            return
        pg_ctl = str(_pg_bindir() / "pg_ctl")
        asked = _request_shutdown(self._as_postgres(pg_ctl, "-D", str(self.datadir), "-m", "fast", "-w",
                                                    "-t", str(int(STOP_TIMEOUT)), "stop"))
        # SIGINT is PostgreSQL's fast shutdown; SIGTERM would wait for every client to disconnect.
        _terminate(self.pid, "postgres", signal.SIGINT, grace=5 if asked else 0)


def _pg_bindir() -> Path:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if not versions:
        raise RuntimeError("no PostgreSQL server under /usr/lib/postgresql: run scripts/install-deps.sh")
    return versions[-1].parent


def _ensure_os_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-r", "-M", name], check=True)


def _postgres_home(base_dir: Path) -> Path:
    """`base_dir/postgres`, or, when the postgres OS user cannot pass through base_dir's parents (say it
    lives under /root), a directory under /tmp that `base_dir/postgres` links to: we do not loosen the
    permissions of directories we do not own. Restarts follow the link, so the data is kept; removing
    base_dir leaves the linked directory behind."""
    home = base_dir / "postgres"
    if home.exists():
        return home.resolve()
    if home.is_symlink():  # its /tmp target was cleaned away: start afresh
        home.unlink()
    if os.geteuid() != 0 or _others_can_reach(base_dir):
        return home
    elsewhere = Path(tempfile.mkdtemp(prefix="cdc-pg-"))
    home.symlink_to(elsewhere)
    return elsewhere


def _others_can_reach(path: Path) -> bool:
    path = path.resolve()
    if path.stat().st_uid == os.geteuid():
        path.chmod(path.stat().st_mode | 0o011)  # the caller's own servers dir: ours to open up
    return all(p.stat().st_mode & 0o001 for p in [path, *path.parents])


@dataclass
class _Recorded:
    """What servers.json says about one server."""
    port: int | None = None
    pid: int = 0


def _read_state(base_dir: Path) -> dict[str, _Recorded]:
    path = base_dir / STATE_FILE
    raw = json.loads(path.read_text()) if path.exists() else {}
    return {name: _Recorded(entry.get("port"), entry.get("pid", 0)) for name, entry in raw.items()}


def _write_state(base_dir: Path, *servers: MariaDbServer | PostgresServer) -> None:
    state = {
        "mariadb" if isinstance(s, MariaDbServer) else "postgres":
            {"port": s.port, "pid": s.pid, "url": s.public_url(), "datadir": str(s.datadir)}
        for s in servers
    }
    (base_dir / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")


def _recorded_mariadb(base_dir: Path, state: dict[str, _Recorded]) -> MariaDbServer | None:
    rec = state.get("mariadb")
    return MariaDbServer(base_dir / "mariadb", rec.port, rec.pid) if rec and rec.port else None


def _recorded_postgres(base_dir: Path, state: dict[str, _Recorded]) -> PostgresServer | None:
    rec = state.get("postgres")
    return PostgresServer((base_dir / "postgres").resolve(), rec.port, rec.pid) if rec and rec.port else None


def _alive(server: MariaDbServer | PostgresServer | None) -> bool:
    command = "mariadbd" if isinstance(server, MariaDbServer) else "postgres"
    return server is not None and _running(server.pid, command) and server.answers()


def _restartable_port(server: MariaDbServer | PostgresServer | None) -> int:
    """The recorded port when it is still free (clients' configs keep working), else a new one."""
    if server is not None and _bindable(server.port):
        return server.port
    return free_port()


Server = TypeVar("Server", MariaDbServer, PostgresServer)


def _reuse_or_start(old: Server | None, start: Callable[[int], Server]) -> Server:
    if _alive(old):
        return old
    if old is not None:
        old.stop()  # alive but not answering: it still holds the data directory's locks
    return start(_restartable_port(old))


def start_servers(base_dir: Path) -> tuple[MariaDbServer, PostgresServer]:
    """Both servers under `base_dir`: those recorded in servers.json and still answering are reused, the
    others (re)started on their existing data. servers.json is written after each start, so `stop_servers`
    also finds a MariaDB whose PostgreSQL then failed to start."""
    base_dir = base_dir.resolve()
    base_dir.mkdir(parents=True, exist_ok=True)
    state = _read_state(base_dir)
    mariadb = _reuse_or_start(_recorded_mariadb(base_dir, state),
                              lambda port: MariaDbServer(base_dir / "mariadb", port).start())
    _write_state(base_dir, mariadb)
    postgres = _reuse_or_start(_recorded_postgres(base_dir, state),
                               lambda port: PostgresServer(_postgres_home(base_dir), port).start())
    _write_state(base_dir, mariadb, postgres)
    return mariadb, postgres


def attach(base_dir: Path) -> tuple[MariaDbServer, PostgresServer] | None:
    """The servers recorded in `base_dir/servers.json`, if both are running and answering."""
    base_dir = base_dir.resolve()
    state = _read_state(base_dir)
    mariadb, postgres = _recorded_mariadb(base_dir, state), _recorded_postgres(base_dir, state)
    return (mariadb, postgres) if _alive(mariadb) and _alive(postgres) else None


def stop_servers(base_dir: Path) -> None:
    """Stop whatever servers.json records under `base_dir`. The data stays, and so do the ports in
    servers.json, so that the next start keeps configs that name them working."""
    base_dir = base_dir.resolve()
    state = _read_state(base_dir)
    recorded = [s for s in (_recorded_mariadb(base_dir, state), _recorded_postgres(base_dir, state)) if s]
    for server in recorded:
        server.stop()
        server.pid = 0
    if recorded:
        _write_state(base_dir, *recorded)


@contextmanager
def running_servers(base_dir: Path) -> Iterator[tuple[MariaDbServer, PostgresServer]]:
    try:
        yield start_servers(base_dir)
    finally:
        stop_servers(base_dir)  # also after a half-finished start


def _describe(servers: tuple[MariaDbServer, PostgresServer]) -> str:
    return "\n".join(f"{name}: {s.public_url()} (pid {s.pid}, data {s.datadir})"
                     for name, s in zip(("mariadb", "postgres"), servers))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cdc_assets.dev.servers",
                                     description="Private MariaDB and PostgreSQL for tests and the demo.")
    parser.add_argument("command", choices=("start", "stop", "status"))
    parser.add_argument("dir", type=Path, help="folder holding their data, logs and servers.json")
    args = parser.parse_args(argv)
    if args.command == "start":
        print(_describe(start_servers(args.dir)))
        print(f"MariaDB user {DEV_USER} has the fixed dev password; PostgreSQL trusts loopback.")
        return 0
    if args.command == "stop":
        stop_servers(args.dir)
        print("stopped")
        return 0
    running = attach(args.dir)
    print("not running" if running is None else _describe(running))
    return 0 if running else 1


if __name__ == "__main__":
    sys.exit(main())
