"""servers.json: the ports and pids of the servers under a folder, so that a later process can attach to
them, stop them, or restart them on the same ports."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cdc_assets.dev.mariadb import MariaDbServer
from cdc_assets.dev.postgres import PostgresServer

STATE_FILE = "servers.json"


@dataclass
class _Recorded:
    """What servers.json says about one server."""
    port: int | None = None
    pid: int = 0


def _read_state(base_dir: Path) -> dict[str, _Recorded]:
    path = base_dir / STATE_FILE
    raw = json.loads(path.read_text()) if path.exists() else {}
    return {name: _Recorded(entry.get("port"), entry.get("pid", 0)) for name, entry in raw.items()}


def write_state(base_dir: Path, *servers: MariaDbServer | PostgresServer) -> None:
    state = {
        "mariadb" if isinstance(s, MariaDbServer) else "postgres":
            {"port": s.port, "pid": s.pid, "url": s.public_url(), "datadir": str(s.datadir)}
        for s in servers
    }
    (base_dir / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")


def recorded_servers(base_dir: Path) -> tuple[MariaDbServer | None, PostgresServer | None]:
    """The servers servers.json names under `base_dir` (running or not); None for one it does not name."""
    state = _read_state(base_dir)
    mariadb, postgres = state.get("mariadb"), state.get("postgres")
    return (MariaDbServer(base_dir / "mariadb", mariadb.port, mariadb.pid) if mariadb and mariadb.port else None,
            PostgresServer((base_dir / "postgres").resolve(), postgres.port, postgres.pid)
            if postgres and postgres.port else None)
