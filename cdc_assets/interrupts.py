"""SIGINT and SIGTERM in a `cdc-assets` command: it stops promptly, says so in one line, and exits with the shell's
code for the signal (130, 143).

Most commands stop at once: `Interrupted` is raised wherever the main thread is (waiting, reading, writing), so
what a database transaction had not committed is rolled back, as after a crash, which every write of a split,
a checkpoint, a reset or a savepoint is made to survive. A sync stops at its own safe point instead: within
`deferred` the signal sets `requested()`, the sync loop's stop, so the batch in hand is applied and checkpointed,
and `Interrupted` comes at the block's end. A second signal ends the process by the signal itself.

Inside a Dagster run (the snapshot's groups) Dagster's own handler takes the signal and fails the run; the
signal is still seen here, through the wakeup fd, so the snapshot stops after that run instead of starting the
next. Nothing happens unless the CLI `install`ed the handlers: a Dagster run's process keeps its own.
"""
from __future__ import annotations

import os
import select
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """A command stopped by SIGINT/SIGTERM. A BaseException, as KeyboardInterrupt: no `except Exception` on the
    way takes it for a failure of its own."""

    def __init__(self, signum: int, told: bool = False) -> None:
        self.signum, self.told = signum, told
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def line(self, command: str) -> str:
        """The one line a command stopped at once prints: what holds, and the way on."""
        return f"{self}: cdc-assets {command} stopped; " + WAY_ON.get(command, "nothing was changed half-way")


WAY_ON = {
    "snapshot": "the splits committed so far stay, none half-way; `cdc-assets snapshot` reads the others",
    "sync": "nothing was applied past the checkpoint; `cdc-assets sync` goes on from it",
    "plan": "a plan is kept whole or not at all; run `cdc-assets plan` again",
}


class _State:
    def __init__(self) -> None:
        self.installed = False
        self.received: int | None = None  # the first signal
        self.handled = 0  # signals our handler ran for
        self.depth = 0  # of `deferred` blocks the main thread is in
        self.doing = ""  # what the outermost deferred block does on a signal, for the line it prints
        self.stop = threading.Event()
        self.wakeup: int | None = None  # read end of the pipe the C-level handler writes each signal's number to


_state = _State()


def install() -> None:
    """Handlers for the CLI's process: each command stops as the module docstring says."""
    if threading.current_thread() is not threading.main_thread():
        return
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    _state.wakeup, _state.installed = read, True
    for signum in SIGNALS:
        signal.signal(signum, _handle)
    threading.Thread(target=_watch, name="cdc-assets signals", daemon=True).start()


def requested() -> threading.Event:
    """Set by the first SIGINT/SIGTERM: what a loop that stops at its own safe point waits on."""
    return _state.stop


def received() -> int | None:
    """The first SIGINT/SIGTERM this process got, whichever handler (ours, Dagster's) ran for it."""
    if _state.wakeup is not None:
        _drain(_state.wakeup)
    return _state.received


def _watch() -> None:
    """Notes a signal as it comes, even while a Dagster run's handler holds it, so its output is hushed at once."""
    while True:
        select.select([_state.wakeup], [], [])
        _drain(_state.wakeup)


def _drain(fd: int) -> None:
    try:
        for signum in os.read(fd, 512):
            if signum in SIGNALS:
                _note(signum)
    except BlockingIOError:  # the other reader (`_watch`, `received`) had it
        pass


def check() -> None:
    """Raise `Interrupted` if a signal came, even one another handler took (a Dagster run's)."""
    signum = received()
    if signum is not None:
        raise Interrupted(signum)


@contextmanager
def deferred(doing: str) -> Iterator[None]:
    """Code that stops at its own safe point: a signal within it sets `requested()` and prints `<SIGNAL>: <doing>`;
    it is raised at the block's end."""
    if not _state.installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.depth += 1
    _state.doing = _state.doing or doing
    try:
        yield
    finally:
        _state.depth -= 1
        if _state.depth == 0:
            _state.doing = ""
    if _state.depth == 0 and _state.received is not None:
        raise Interrupted(_state.received, told=True)


def _handle(signum: int, frame) -> None:
    _state.handled += 1  # not `received`: the wakeup fd's watcher may note this very signal before it gets here
    _note(signum)
    if _state.handled > 1:
        _die(signum)
    if _state.depth == 0:
        raise Interrupted(signum)
    name = signal.Signals(signum).name
    say(f"{name}: {_state.doing}; {name} again stops at once")


def _note(signum: int) -> None:
    if _state.received is None:
        _state.received = signum
        # What libraries print from here on (a failed Dagster run's stack traces, Spark's cancelled jobs) is the
        # stop itself, said in the command's own line: written to sys.__stderr__ (`say`).
        sys.stderr = open(os.devnull, "w")
    _state.stop.set()


def say(line: str) -> None:
    """A line of the command's own on stderr, also once the libraries' output is hushed."""
    print(line, file=sys.__stderr__ if _state.received is not None else sys.stderr, flush=True)


def _die(signum: int) -> None:
    """The process ends by the signal, as without a handler: whatever was not committed is rolled back."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
