"""`dagster-daemon run` with the backfill daemon's loop at a chosen interval (`cdc-assets ui` starts it).

Dagster's backfill daemon looks at backfills every `DEFAULT_DAEMON_INTERVAL_SECONDS` (30 s), a module constant it
reads when its loop starts, with no setting: a backfill launched from the UI waits up to 30 s for its first run and
up to 30 s after its last one to show as completed. For a backfill of a few small splits that wait was most of
its time (bench/backfill.py). One loop reads the instance's backfills (a query on its run storage) and nothing
else when none is in progress.
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cdc_assets.defs.daemon", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backfill-interval", type=float, default=1.0, help="seconds between two looks at the "
                        "backfills (default 1; Dagster's own: 30)")
    args, rest = parser.parse_known_args(argv)
    import dagster._daemon.controller as controller
    from dagster._daemon.cli import main as dagster_daemon

    dagsters = getattr(controller, "DEFAULT_DAEMON_INTERVAL_SECONDS", None)
    if not isinstance(dagsters, (int, float)):
        print("this Dagster has no DEFAULT_DAEMON_INTERVAL_SECONDS: its backfill daemon loops at its own interval",
              file=sys.stderr, flush=True)
    else:
        controller.DEFAULT_DAEMON_INTERVAL_SECONDS = args.backfill_interval
        print(f"backfill daemon: looks at backfills every {args.backfill_interval:g} s (Dagster's own: "
              f"{dagsters:g} s)", file=sys.stderr, flush=True)
    sys.argv = ["dagster-daemon", *rest]
    return dagster_daemon()


if __name__ == "__main__":
    sys.exit(main())
