"""The interpreter settings of the log phase (engine/interpreter.py) hold while any sync applies, and are given
back when the last one ends, whatever order they end in."""
from __future__ import annotations

import gc
import sys
from contextlib import ExitStack

from cdc_assets.engine.interpreter import SWITCH_SECONDS, YOUNG_OBJECTS, applying_the_log


def test_settings_hold_while_any_sync_applies_and_come_back_after_the_last():
    before = gc.get_threshold(), sys.getswitchinterval()
    first, second = ExitStack(), ExitStack()
    first.enter_context(applying_the_log())
    second.enter_context(applying_the_log())
    first.close()  # not nested: the first one to start ends first
    assert gc.get_threshold()[0] == YOUNG_OBJECTS and sys.getswitchinterval() <= SWITCH_SECONDS
    second.close()
    assert (gc.get_threshold(), sys.getswitchinterval()) == before
