"""`python -m cdc_assets_tests.adversary --seed N --scenarios K [--direction D] [--reset] [--target-away-pg]
[--restart] [--replan] [--schema-changes] [--shrink]`: runs the scenarios
of seeds N..N+K-1 on private servers started in a temp dir (stopped at the end), prints each outcome and a
summary; a failing seed is printed with the command that reruns it. Exit status 1 when any scenario failed."""
from __future__ import annotations

import argparse
import re
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from cdc_assets_tests.adversary.scenario import EVERY_DIRECTION, build

GOOD = ("pass", "expected_stop")  # the target equal to the source, or the documented loud stop


@contextmanager
def private_servers():
    from cdc_assets.config import SparkConfig
    from cdc_assets.dev.mariadb import MariaDbServer
    from cdc_assets.dev.processes import free_port
    from cdc_assets.dev.servers import running_servers
    from cdc_assets.spark.session import build_session
    from cdc_assets_tests.adversary.runner import Servers

    base = Path(tempfile.mkdtemp(prefix="cdc-adversary-"))
    try:
        with running_servers(base) as (mariadb, postgres):
            target = MariaDbServer(base / "mariadb_target", free_port()).start()
            spark, _ = build_session(SparkConfig(master="local[2]", driver_memory="1g"), app_name="adversary")
            try:
                yield Servers(mariadb, postgres, target, spark, base / "work")
            finally:
                try:
                    spark.stop()  # after a SIGTERM its JVM may be gone already, and stop() raises
                finally:
                    target.stop()
                    for server in (postgres, mariadb):  # a source restart gave it a pid servers.json does not hold
                        server.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cdc_assets_tests.adversary", description=__doc__)
    p.add_argument("--seed", type=int, default=1, help="the first seed")
    p.add_argument("--scenarios", type=int, default=1, help="how many seeds, from --seed on")
    p.add_argument("--direction", choices=EVERY_DIRECTION, action="append",
                   help="run each seed in this direction (repeatable; default: the direction the seed draws, one of "
                        "the single-target ones; mysql-three and postgres-three write three targets at once)")
    p.add_argument("--reset", action="store_true",
                   help="give every scenario a reset fault (default: the seeds that draw one have it)")
    p.add_argument("--target-away-pg", action="store_true",
                   help="give every scenario with a PostgreSQL target it can be drawn for a PostgreSQL target away "
                        "(its database closed to connections and opened again; default: never)")
    p.add_argument("--restart", action="store_true",
                   help="give every scenario a source restart while a sync runs (default: never)")
    p.add_argument("--replan", action="store_true",
                   help="give every scenario an operator's plan --replan and snapshot while the application writes "
                        "(default: never)")
    p.add_argument("--schema-changes", action="store_true",
                   help="give every scenario 1-3 schema changes in its log phase, under a "
                        "schema_change_policy drawn from the seed (default: none)")
    p.add_argument("--verify", action="store_true",
                   help="end every scenario with the task's own verification (default: the seeds that draw it)")
    p.add_argument("--shrink", action="store_true", help="reduce a failing seed to fewer rows and transactions")
    p.add_argument("--confirm", action="store_true", help="rerun a failing seed once: a pass says timing made it flaky")
    p.add_argument("--describe", action="store_true", help="print the scenarios without running them")
    p.add_argument("--script", action="store_true", help="print each scenario's statements without running them")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the private servers are stopped
    seeds = range(args.seed, args.seed + args.scenarios)
    scenarios = [build(s, d, reset=args.reset or None, away_pg=args.target_away_pg, restart=args.restart,
                       schema_changes=args.schema_changes, verify=args.verify or None, replan=args.replan)
                 for s in seeds for d in (args.direction or [None])]
    if args.describe or args.script:
        print("\n".join(s.script() if args.script else s.describe() for s in scenarios))
        return 0
    from cdc_assets_tests.adversary.runner import Outcome, run
    from cdc_assets_tests.adversary.shrink import shrink

    started, outcomes = time.monotonic(), []
    with private_servers() as servers:
        for scenario in scenarios:
            print(scenario.describe(), flush=True)
            try:
                outcome = run(scenario, servers)
            except Exception as exc:  # noqa: BLE001 - the harness failed on this seed: the next ones still run
                outcome = Outcome(scenario.seed, scenario.direction, "error", [f"{type(exc).__name__}: {exc}"])
            outcomes.append(outcome)
            print(outcome.line(), flush=True)
            if outcome.status not in GOOD and args.confirm:
                again = run(scenario, servers)
                print(f"    rerun: {again.status.upper()}" + ("" if again.status == outcome.status else
                      " -- flaky: the outcome depends on timing (where the writes fell against the snapshot's "
                      "watermarks and the faults; see the timing lines)"), flush=True)
            if outcome.status not in GOOD:
                print(f"    rerun: python -m cdc_assets_tests.adversary --seed {scenario.seed} --scenarios 1 "
                      f"--direction {scenario.direction}{rerun_flags(scenario)}", flush=True)
                if args.shrink:
                    print("shrunk to:\n" + shrink(scenario, outcome, servers).script(), flush=True)
    print(summary(outcomes, time.monotonic() - started))
    return 1 if any(o.status not in GOOD for o in outcomes) else 0


def rerun_flags(scenario) -> str:
    """The flags that gave the scenario a fault its seed alone does not draw."""
    flags = {"target_away_pg": " --target-away-pg", "restart": " --restart", "replan": " --replan"}
    return "".join(flags[f.kind] for f in scenario.faults if f.kind in flags) + \
        (" --schema-changes" if scenario.changes else "") + (" --verify" if scenario.verify else "")


def summary(outcomes, seconds: float) -> str:
    by = Counter((o.direction, o.status) for o in outcomes)
    faults = Counter(" ".join(re.match(r"(\w+)\(.*?\) (\w+)", f).groups()) for o in outcomes for f in o.faults)
    lines = [f"{len(outcomes)} scenarios in {seconds:.0f} s"]
    lines += [f"  {d}: {s} x{n}" for (d, s), n in sorted(by.items())]
    lines += [f"  fault {f} x{n}" for f, n in sorted(faults.items())]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
