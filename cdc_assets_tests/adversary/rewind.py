"""The reset fault at a quiet point (faults.py `Reset`): no sync running, every target caught up and equal to the
source. Checks what docs/operations/reset.md promises: a reset moves every target's checkpoint to the position
given, or refuses one the log no longer has (PostgreSQL: the slot confirmed past it) and moves nothing; the sync
after it replays from there and every target ends equal to the source."""
from __future__ import annotations

from functools import cmp_to_key

from cdc_assets.core.positions import compare
from cdc_assets_tests.adversary.faults import TIMEOUT, Injected, Reset, run_cli
from cdc_assets_tests.adversary.oracle import checkpoints

GONE = "is no longer in the source's log"  # reset.py's PositionLost: a documented refusal
EFFECTS = {"replays": "are applied to the target again", "none": "nothing is skipped or replayed",
           "skips": "are never applied"}  # the warning a reset prints per target, by effect


def earliest(positions) -> object:
    return min(positions, key=cmp_to_key(compare))


def reset_at_quiet_point(fault: Injected, noted: list[dict], config, path, env: dict, result,
                         watch) -> tuple[str, str]:
    """Runs the reset, its line added to `result.faults`; `noted`: each quiet point's checkpoints so far, this
    one's last. Returns ("pass", "") when the reset did as documented (the caller then syncs and compares), else
    the outcome's status ("stopped": the reset failed; "divergence": checkpoints not where it says) and why."""
    now = noted[-1]
    # Every target to one position, the earliest one holds: a reset to it replays or moves nothing, never skips.
    to = earliest((noted[0] if fault.point == "back" else now).values())
    with watch.rewinding():
        proc = run_cli(path, env, *Reset().args(fault, to.to_json()))
        out, _ = proc.communicate(timeout=TIMEOUT)  # its lines say the effect, on a pass too
        status = "passed" if proc.returncode == 0 else "stopped"
        after = checkpoints(config)
    refused = status == "stopped" and GONE in out
    effect = ", ".join(sorted({e for line in out.splitlines() for e, said in EFFECTS.items() if said in line}))
    result.faults.append(f"{fault.describe()} {'refused: position gone' if refused else status}"
                         + (f" ({effect})" if status == "passed" else ""))
    if refused:
        moved = {n: str(p) for n, p in after.items() if compare(p, now[n]) != 0}
        return ("divergence", f"a refused reset moved checkpoints: {moved}") if moved else ("pass", "")
    if status != "passed":
        return "stopped", f"{fault.describe()}: {status}: {out.strip()[-1500:]}"
    if fault.point == "earliest":  # the slot's confirmed position: the checkpoint or just before it
        ahead = {n: str(p) for n, p in after.items() if compare(p, now[n]) > 0}
        return ("divergence", f"reset --to earliest moved checkpoints forward: {ahead}") if ahead else ("pass", "")
    wrong = {n: str(p) for n, p in after.items() if compare(p, to) != 0}
    return ("divergence", f"reset --to position {to} left checkpoints elsewhere: {wrong}") if wrong else ("pass", "")
