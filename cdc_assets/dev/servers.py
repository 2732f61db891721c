"""Private MariaDB (binlog ROW/FULL) and PostgreSQL (wal_level=logical) servers on free loopback ports.

For tests, the demo and benchmarks: never the machine's shared services, whose settings we do not own.
`python -m cdc_assets.dev.servers start|stop|status DIR` runs them by hand; `servers.json` in DIR lets a
later process attach to servers that are still running, and a restart reuses the data left in DIR.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from cdc_assets.dev.mariadb import DEV_USER, PASSWORD_FILE, MariaDbServer
from cdc_assets.dev.permissions import postgres_home
from cdc_assets.dev.postgres import PostgresServer
from cdc_assets.dev.processes import bindable, free_port, running
from cdc_assets.dev.state import recorded_servers, write_state


def _alive(server: MariaDbServer | PostgresServer | None) -> bool:
    command = "mariadbd" if isinstance(server, MariaDbServer) else "postgres"
    return server is not None and running(server.pid, command) and server.answers()


def _restartable_port(server: MariaDbServer | PostgresServer | None) -> int:
    """The recorded port when it is still free (clients' configs keep working), else a new one."""
    if server is not None and bindable(server.port):
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
    old_mariadb, old_postgres = recorded_servers(base_dir)
    mariadb = _reuse_or_start(old_mariadb, lambda port: MariaDbServer(base_dir / "mariadb", port).start())
    if mariadb is old_mariadb:
        mariadb.grant_dev_user()
    write_state(base_dir, mariadb)
    postgres = _reuse_or_start(old_postgres, lambda port: PostgresServer(postgres_home(base_dir), port).start())
    write_state(base_dir, mariadb, postgres)
    return mariadb, postgres


def attach(base_dir: Path) -> tuple[MariaDbServer, PostgresServer] | None:
    """The servers recorded in `base_dir/servers.json`, if both are running and answering."""
    base_dir = base_dir.resolve()
    mariadb, postgres = recorded_servers(base_dir)
    return (mariadb, postgres) if _alive(mariadb) and _alive(postgres) else None


def stop_servers(base_dir: Path) -> None:
    """Stop whatever servers.json records under `base_dir`. The data stays, and so do the ports in
    servers.json, so that the next start keeps configs that name them working."""
    base_dir = base_dir.resolve()
    recorded = [s for s in recorded_servers(base_dir) if s]
    for server in recorded:
        server.stop()
        server.pid = 0
    if recorded:
        write_state(base_dir, *recorded)


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
        print(f"MariaDB user {DEV_USER}'s password is in {args.dir / 'mariadb' / PASSWORD_FILE}; PostgreSQL trusts "
              "loopback.")
        return 0
    if args.command == "stop":
        stop_servers(args.dir)
        print("stopped")
        return 0
    attached = attach(args.dir)
    print("not running" if attached is None else _describe(attached))
    return 0 if attached else 1


if __name__ == "__main__":
    sys.exit(main())
