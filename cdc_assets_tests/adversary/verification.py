"""The task's own verification at the end of a scenario its oracle passed: `cdc-assets verify` (lock-free, beside
a running sync, as docs/operations/verify.md runs it) must find every split of every target equal. A FAILED split
there is a false alarm, and an INCONCLUSIVE one with the application quiet a finding too: each is a status of its
own. Drawn for a share of the scenarios from a stream of the seed of its own (`--verify`: every one).

One INCONCLUSIVE is the documented outcome (docs/operations/verify.md): a split of a table whose source has
columns the log phase does not apply yet, a PostgreSQL schema change no row change of the table followed
(schema_changes.target_names), naming those columns."""
from __future__ import annotations

import re
import signal
import subprocess

from cdc_assets_tests.adversary.faults import outcome, run_cli
from cdc_assets_tests.adversary.ways_out import MISSING

WAIT_SECS = "60"  # for the running sync's checkpoint to pass each split's read


# Splits the verification could not compare because their table has columns the log phase does not apply yet
# (one line for several: engine/verify.py summary_lines): (how many splits, the table, the columns).
UNMET = re.compile(r"^\S+(?: \.\. \S+ \((\d+) splits\))?: INCONCLUSIVE: \S+?\.(\S+) has columns the log phase "
                   r"does not apply yet \(([^)]*)\)", re.M)


def _verified(path, env: dict) -> tuple[str, str]:
    sync = run_cli(path, env, "sync")
    try:
        return outcome(run_cli(path, env, "verify", "--wait", WAIT_SECS))
    finally:
        sync.send_signal(signal.SIGTERM)
        try:
            sync.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            sync.kill()
            sync.communicate()


def verify_at_the_end(path, env: dict, result, unmet: dict[str, set[str]] | None = None) -> None:
    """Run the verification beside a sync, and say in `result` what it found. `unmet`: per table, the source's
    columns the log phase has not met yet: its splits may be inconclusive naming them, as the docs say."""
    status, out = _verified(path, env)
    if status == "stopped" and MISSING.search(out) and result.ways_out:
        # a PostgreSQL table renamed under `ignore`: the log phase went on, but a split is read by the table's name
        way, wrong = result.ways_out.apply(out)
        if way and not wrong:
            result.faults.append(f"way_out_{way}() applied after verify")
            status, out = _verified(path, env)
    equal = re.search(r"(\d+)/(\d+) splits equal", out or "")
    if status == "passed":
        result.faults.append("verify() passed")
        return
    documented = [m for m in UNMET.finditer(out or "") if set(m.group(3).split(", ")) <= (unmet or {}).get(
        m.group(2), set())]
    splits = sum(int(m.group(1) or 1) for m in documented)
    if equal and documented and int(equal.group(2)) - int(equal.group(1)) == splits:
        result.faults.append(f"verify() passed, {splits} splits inconclusive as documented: the schema change of "
                             f"{', '.join(sorted({m.group(2) for m in documented}))} not met yet")
        return
    result.status = "false_alarm" if re.search(r"\bFAILED\b", out) else "inconclusive"
    result.details.append(f"verify at the end{f' ({equal.group(0)})' if equal else ''}: {out.strip()[-1500:]}")
