"""Child processes of the dev servers: free loopback ports, running a setup command, waiting for a
condition, and stopping a server process that may not be our child."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bindable(port: int) -> bool:
    with socket.socket() as s:
        # Same flag the servers use, so a port left in TIME_WAIT by our previous run still counts as free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else f"({path} does not exist)"


def run(args: list[str], what: str, timeout: float = START_TIMEOUT, stdin: str | None = None) -> None:
    done = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")


def running(pid: int, command: str) -> bool:
    """Is `pid` a live (not zombie) `command` process? The name check keeps a recycled pid from being
    mistaken for our server, or killed as one."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    state = stat[stat.rindex(")") + 2]
    return name == command and state not in "ZX"


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def request_shutdown(args: list[str]) -> bool:
    """Run a shutdown command; False when it failed or hung."""
    try:
        return subprocess.run(args, capture_output=True, timeout=STOP_TIMEOUT).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def terminate(pid: int, command: str, polite: signal.Signals, grace: float) -> None:
    """Give `pid` `grace` seconds to finish a requested shutdown, then send `polite`, then SIGKILL."""
    for sig, wait in ((None, grace), (polite, 10.0), (signal.SIGKILL, 10.0)):
        if sig is not None and running(pid, command):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
        if wait_for(lambda: not running(pid, command), wait):
            return
    raise RuntimeError(f"{command} pid {pid} survived SIGKILL")


def stop_groups(processes: list[subprocess.Popen], grace: float = 10) -> None:
    """SIGTERM each process's group in the order given, SIGKILL what is left after `grace` s: each process leads its
    own group (start_new_session), so what it started (executors, Python workers) goes with it."""
    for process in processes:
        _signal_group(process, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait(timeout=grace)
        _signal_group(process, signal.SIGKILL)  # children that outlived their leader


def _signal_group(process: subprocess.Popen, sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def pyspark_home() -> str:
    """The pyspark installation's folder: its bin/ and sbin/ start Spark's JVMs."""
    import pyspark

    return os.path.dirname(pyspark.__file__)
