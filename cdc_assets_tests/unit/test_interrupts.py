"""interrupts.py in a process of its own, signalled for real: at once (exit 128+signal, one line), at a deferred
block's safe point, at once on a second signal, and after a signal another handler took (a Dagster run's)."""
import signal
import subprocess
import sys
import time

import pytest

PROGRAM = """
import signal, sys, time
from cdc_assets import interrupts
interrupts.install()
try:
    MODE
    code = 0
except interrupts.Interrupted as exc:
    if not exc.told:
        interrupts.say(exc.line("plan"))
    code = exc.exit_code
sys.exit(code)
"""
MODES = {
    "at_once": "print('ready', flush=True); time.sleep(30)",
    "deferred": """with interrupts.deferred("the batch ends first"):
        print('ready', flush=True)
        while not interrupts.requested().wait(0.05):
            pass
        print('batch ended', flush=True)""",
    "deferred_ignored": """with interrupts.deferred("the batch ends first"):
        print('ready', flush=True)
        time.sleep(30)""",
    "foreign_handler": """seen = []
    signal.signal(signal.SIGTERM, lambda *_: seen.append(1))  # as Dagster's, during a run
    print('ready', flush=True)
    while not seen:
        time.sleep(0.05)
    deadline = time.monotonic() + 10  # the watcher thread hushes; on a loaded machine it may run late
    while sys.stderr is sys.__stderr__ and time.monotonic() < deadline:
        time.sleep(0.01)
    print('noise a library prints after the signal', file=sys.stderr, flush=True)
    interrupts.check()""",
}


def start(mode: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", PROGRAM.replace("MODE", MODES[mode])], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    return proc


@pytest.mark.parametrize("mode, sig, code, stdout, stderr", [
    ("at_once", signal.SIGTERM, 143, "", "SIGTERM: cdc-assets plan stopped; a plan is kept whole or not at all; "
                                         "run `cdc-assets plan` again\n"),
    ("at_once", signal.SIGINT, 130, "", "SIGINT: cdc-assets plan stopped; a plan is kept whole or not at all; "
                                        "run `cdc-assets plan` again\n"),
    ("deferred", signal.SIGINT, 130, "batch ended\n", "SIGINT: the batch ends first; SIGINT again stops at once\n"),
    ("foreign_handler", signal.SIGTERM, 143, "", "SIGTERM: cdc-assets plan stopped; a plan is kept whole or not at "
                                                 "all; run `cdc-assets plan` again\n"),
])
def test_one_signal_stops_with_one_line_and_the_shells_code(mode, sig, code, stdout, stderr):
    for _ in range(3):  # the handler and the wakeup fd's watcher race for each signal's note
        proc = start(mode)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
        assert (proc.returncode, out, err) == (code, stdout, stderr)


def test_a_second_signal_ends_the_process_by_the_signal():
    proc = start("deferred_ignored")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == -signal.SIGINT
    assert err == "SIGINT: the batch ends first; SIGINT again stops at once\n"
