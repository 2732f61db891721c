"""One writer of a task's checkpoint at a time: `sync` holds the task's lock while it runs; `reset` and a savepoint
rollback take it for their write. Without it, a running sync writes its next checkpoint over the one they set.

An flock on a file in the task's data_dir (where its split plans live too, so every process running the task
already shares that folder): the kernel drops it when its process dies, even by SIGKILL, so no crash leaves the
task locked.
"""
from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from cdc_assets.config import TaskConfig
from cdc_assets.errors import CdcError

LOCK_FILE = "checkpoint.lock"


class TaskBusy(CdcError):
    """Another process holds the task's checkpoint."""


@contextmanager
def checkpoint_writer(config: TaskConfig, purpose: str) -> Iterator[None]:
    """Hold the task's lock for `purpose` (sync, reset, rollback), or raise TaskBusy naming who holds it."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    path = config.data_dir / f"{config.task_id}.{LOCK_FILE}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise TaskBusy(f"cannot {purpose} task {config.task_id}: {holder} holds its checkpoint ({path})",
                           "stop it first (a Dagster run: terminate it in the Runs page), then try again") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{purpose} (pid {os.getpid()})".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
