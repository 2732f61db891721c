"""The task's lease: one writer of a task's checkpoint at a time. `sync` holds it while it runs; `reset` and the
savepoint commands (create, rollback, delete) hold it for their writes. Without it a running sync would write its
next checkpoint over the one a reset or a rollback set.

An flock on a file in the task's data_dir (where its split plans live too, so every process running the task
already shares that folder), whatever the target's engine: the kernel drops it when its process dies, even by
SIGKILL, so no crash leaves the task locked. Re-entrant per owner (a runtime): `sync --savepoint-on-stop` holds it
across the sync and the savepoint it takes at the end, with no batch in between.
"""
from __future__ import annotations

import fcntl
import logging
import os
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from cdc_assets.config import TaskConfig
from cdc_assets.errors import CdcError

LOCK_FILE = "checkpoint.lock"
POLL_SECS = 0.5
NAMING_SECS = 0.5  # how long a lease taken and not named yet (or being left) may stay unnamed to a probe
log = logging.getLogger("cdc_assets.task_lock")
_held: "weakref.WeakKeyDictionary[object, list[int]]" = weakref.WeakKeyDictionary()  # owner -> [depth]


class TaskBusy(CdcError):
    """Another process (or runtime) holds the task's lease, named in the message. Way out: stop it first (a
    `cdc-assets sync`: SIGTERM; a Dagster run: terminate it), then try again (docs/operations/task-lease.md)."""


@contextmanager
def task_lease(config: TaskConfig, doing: str, owner: object, wait: float = 0.0) -> Iterator[None]:
    """Hold the task's lease for `doing` (sync, reset, savepoint rollback NAME...); wait up to `wait` seconds for
    its holder, then raise TaskBusy naming it."""
    depth = _held.get(owner)
    if depth is not None:
        depth[0] += 1
        try:
            yield
        finally:
            depth[0] -= 1
        return
    config.data_dir.mkdir(parents=True, exist_ok=True)
    path = config.data_dir / f"{config.task_id}.{LOCK_FILE}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, config, doing, wait, path)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{doing} (pid {os.getpid()})".encode(), 0)
        _held[owner] = [1]
        try:
            yield
        finally:
            _held.pop(owner, None)
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fd: int, config: TaskConfig, doing: str, wait: float, path) -> None:
    deadline = time.monotonic() + wait
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        if time.monotonic() >= deadline:
            raise TaskBusy(f"cannot {doing} task {config.task_id}: {holder} holds its checkpoint ({path})",
                           "stop it first (a `cdc-assets sync`: SIGTERM, and `--savepoint-on-stop NAME` takes a "
                           "savepoint as it stops; a Dagster run: terminate it in the Runs page), then try again")
        if not told:
            log.warning("task %s: %s holds its checkpoint; %s waits up to %.0f s", config.task_id, holder, doing, wait)
            told = True
        time.sleep(POLL_SECS)


def lease_holder(config: TaskConfig) -> str | None:
    """Who holds the task's lease now ("sync (pid 4242)"), or None when nobody does. Takes nothing: a shared
    flock that is released at once, which only an exclusive holder refuses."""
    try:
        fd = os.open(config.data_dir / f"{config.task_id}.{LOCK_FILE}", os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        # A holder writes its name just after taking the lease, and empties the file just before leaving it.
        deadline = time.monotonic() + NAMING_SECS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                name = os.pread(fd, 200, 0).decode(errors="replace").strip()
                if name or time.monotonic() >= deadline:
                    return name or "another process"
                time.sleep(0.01)
                continue
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
    finally:
        os.close(fd)
