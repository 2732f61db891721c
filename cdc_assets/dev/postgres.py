"""A private PostgreSQL with wal_level=logical on a loopback port, its data, config and log under one folder."""
from __future__ import annotations

import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

import psycopg2

from cdc_assets.dev.permissions import ensure_os_user
from cdc_assets.dev.processes import (START_TIMEOUT, STOP_TIMEOUT, request_shutdown, run, running, tail, terminate,
                                      wait_for)


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
            run(self._as_postgres(str(bindir / "initdb"), "-D", str(self.datadir), "-U", self.user,
                                   "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8",
                                   "--no-sync"), "initdb")  # throwaway data: fsync is off on the server too
        self._configure()
        self._await_dead_postmaster()
        try:
            run(self._as_postgres(str(bindir / "pg_ctl"), "-D", str(self.datadir), "-l", str(self.log_file),
                                   "-w", "-t", str(int(START_TIMEOUT)), "start"), f"pg_ctl start on port {self.port}")
        except RuntimeError as err:
            raise RuntimeError(f"{err}\n{tail(self.log_file)}") from None
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
        if words and not running(int(words[0]), "postgres"):
            wait_for(lambda: not Path(f"/proc/{words[0]}").exists(), 10)

    def _hand_to_postgres_user(self) -> None:
        # initdb and postgres refuse to run as root; as root we run them as the OS user postgres.
        ensure_os_user("postgres")
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
        if not running(self.pid, "postgres"):
            return
        pg_ctl = str(_pg_bindir() / "pg_ctl")
        asked = request_shutdown(self._as_postgres(pg_ctl, "-D", str(self.datadir), "-m", "fast", "-w",
                                                    "-t", str(int(STOP_TIMEOUT)), "stop"))
        # SIGINT is PostgreSQL's fast shutdown; SIGTERM would wait for every client to disconnect.
        terminate(self.pid, "postgres", signal.SIGINT, grace=5 if asked else 0)


def _pg_bindir() -> Path:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if not versions:
        raise RuntimeError("no PostgreSQL server under /usr/lib/postgresql: run scripts/install-deps.sh")
    return versions[-1].parent
