"""The task's own verification at the end of a scenario its oracle passed: `cdc-assets verify` (lock-free, beside
a running sync, as docs/operations/verify.md runs it) must find every split of every target equal. A FAILED split
there is a false alarm, and an INCONCLUSIVE one with the application quiet a finding too: each is a status of its
own. Drawn for a share of the scenarios from a stream of the seed of its own (`--verify`: every one)."""
from __future__ import annotations

import re
import signal
import subprocess

from cdc_assets_tests.adversary.faults import outcome, run_cli

WAIT_SECS = "60"  # for the running sync's checkpoint to pass each split's read


def verify_at_the_end(path, env: dict, result) -> None:
    """Run the verification beside a sync, and say in `result` what it found."""
    sync = run_cli(path, env, "sync")
    try:
        status, out = outcome(run_cli(path, env, "verify", "--wait", WAIT_SECS))
    finally:
        sync.send_signal(signal.SIGTERM)
        try:
            sync.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            sync.kill()
            sync.communicate()
    equal = re.search(r"(\d+)/(\d+) splits equal", out or "")
    if status == "passed":
        result.faults.append("verify() passed")
        return
    result.status = "false_alarm" if re.search(r"\bFAILED\b", out) else "inconclusive"
    result.details.append(f"verify at the end{f' ({equal.group(0)})' if equal else ''}: {out.strip()[-1500:]}")
