"""Where a bench case's CPU goes: the seconds each server process used while it ran, by role (walsender, the
backends of each database, background), sampled from /proc by a separate process so that the sampling costs the
measured Python process no GIL time. Processes that start and end inside the case (a walsender, a target
session) count too: the sampler keeps the last figure it saw of each.

    with ServerCpu(postgres_pid=..., mariadb_pid=...) as cpu:
        ...
    cpu.seconds  # {"walsender": 3.6, "backends of warehouse": 8.9, "background": 0.5, "mariadbd": 0.0}
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INTERVAL = 0.2  # seconds between samples: a process that lives shorter than this may be missed
_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu(pid: str) -> tuple[int, float] | None:
    """(parent pid, user + system seconds) of a live process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS


def _role(pid: str) -> str:
    """`postgres: walsender user addr ...` / `postgres: user database addr state` / `postgres: walwriter`."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().split()
    except OSError:
        return "background"
    if len(words) >= 2 and words[1] == "walsender":
        return "walsender"
    if len(words) >= 4 and "(" in words[3]:  # a client address: a session
        return f"backends of {words[2]}"
    return "background"


def sample(out: Path, postgres_pid: int, mariadb_pid: int) -> None:
    """Until SIGTERM: the CPU seconds the postmaster's children (and mariadbd) used since the first sample, by
    process, written to `out` as {pid: [role, seconds]}."""
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    first: dict[str, float] | None = None  # what the processes of the first sample had used before it
    seen: dict[str, list] = {}  # pid -> [role, seconds since the first sample]
    while not stopping:
        live = {"mariadbd": cpu[1]} if mariadb_pid and (cpu := _cpu(str(mariadb_pid))) else {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and (cpu := _cpu(entry.name)) and cpu[0] == postgres_pid:
                live[entry.name] = cpu[1]
        if first is None:
            first = live
            out.write_text("{}")  # the case may begin
        for pid, seconds in live.items():
            role = seen[pid][0] if pid in seen else "mariadbd" if pid == "mariadbd" else _role(pid)
            seen[pid] = [role, seconds - first.get(pid, 0.0)]
        time.sleep(INTERVAL)
    out.write_text(json.dumps(seen))


class ServerCpu:
    def __init__(self, postgres_pid: int = 0, mariadb_pid: int = 0) -> None:
        self.postgres_pid, self.mariadb_pid = postgres_pid, mariadb_pid
        self.seconds: dict[str, float] = {}

    def __enter__(self) -> "ServerCpu":
        folder = Path(tempfile.mkdtemp())
        self._out = folder / "cpu.json"
        self._proc = subprocess.Popen([sys.executable, __file__, str(self._out), str(self.postgres_pid),
                                       str(self.mariadb_pid)])
        while not self._out.exists():  # its first sample: what the case's own use is counted from
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        time.sleep(INTERVAL)
        self._proc.terminate()
        self._proc.wait()
        seen = json.loads(self._out.read_text())
        self._out.unlink()
        self._out.parent.rmdir()
        for role, seconds in seen.values():
            self.seconds[role] = self.seconds.get(role, 0.0) + seconds


if __name__ == "__main__":
    sample(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
