"""Crash points for the crash tests: `CDC_ASSETS_CRASH_AT=<point>[:<n>]` makes the process SIGKILL itself the
n-th time (default 1st) it passes `point`. A real kill at an exact place, with nothing cleaned up; unset, a
crash point costs one dictionary lookup."""
from __future__ import annotations

import os
import signal

ENV = "CDC_ASSETS_CRASH_AT"
_passes: dict[str, int] = {}


def crash_point(point: str) -> None:
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    name, _, nth = wanted.partition(":")
    if name != point:
        return
    _passes[point] = _passes.get(point, 0) + 1
    if _passes[point] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
