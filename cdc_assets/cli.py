"""`cdc-assets`: plan, snapshot, reset and inspect a task from a shell, through Dagster's own execution API,
so every run and materialization lands in the instance at $DAGSTER_HOME that `dagster dev` shows."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from cdc_assets import interrupts
from cdc_assets.config import CONFIG_ENV, TaskConfig, load_config
from cdc_assets.errors import CdcError, UnreachableError
from cdc_assets.cli_servers import cmd_demo, cmd_spark_connect_server, cmd_ui, dagster_home
from cdc_assets.interrupts import Interrupted


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.verbose:
        _quiet_libraries()
    try:
        return args.func(args)
    except CdcError as exc:
        interrupts.say(f"error: {exc}")
        return 2
    except Interrupted as exc:
        if not exc.told:
            interrupts.say(exc.line(args.func.__name__.removeprefix("cmd_")))
        return exc.exit_code


def run() -> None:
    """The `cdc-assets` program: `main`, then the process ends without the interpreter's teardown. Freeing the
    modules of Dagster, PySpark, pandas and gRPC one by one costs a second or more after every command, and
    nothing of ours needs it: non-daemon threads are joined and the atexit
    handlers run (log flushes, temp folders, the class archive's settling) as at a normal exit."""
    import atexit
    import threading

    interrupts.install()
    code = main()
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cdc-assets", description=__doc__)
    p.add_argument("--config", default=os.environ.get(CONFIG_ENV), help=f"task config YAML (default ${CONFIG_ENV})")
    p.add_argument("--verbose", action="store_true", help="also print the libraries' warnings and logs (Dagster's "
                   "beta/preview warnings, Spark's start-up output, py4j); without it Spark's JVM writes to "
                   "<log_dir>/spark.log")
    sub = p.add_subparsers(required=True, metavar="COMMAND")
    plan = sub.add_parser("plan", help="print the split plan per table and register it as Dagster partitions")
    plan.add_argument("--replan", action="store_true", help="discard existing plans AND positions, then plan anew; the target "
                                                              "tables are kept, every split replaces its key range")
    plan.set_defaults(func=cmd_plan)
    snap = sub.add_parser("snapshot", help="plan if needed, then materialize every unfinished split")
    snap.set_defaults(func=cmd_snapshot)
    sync = sub.add_parser("sync", help="apply the source log to the target from the checkpoint; SIGTERM/SIGINT "
                                       "finish the batch in hand, checkpoint and exit 143/130")
    sync.add_argument("--until-caught-up", action="store_true",
                      help="stop at the source's log end as read at the start, instead of following the log")
    sync.add_argument("--savepoint-on-stop", metavar="NAME",
                      help="when the sync stops (at a batch end: SIGTERM/SIGINT, or caught up), create savepoint NAME "
                           "(on every target)")
    sync.set_defaults(func=cmd_sync)
    reset = sub.add_parser("reset", help="move the checkpoint (stop `sync` first): to the log end, skipping what "
                                         "lies between; or back, replaying; records who moved it from where to where")
    reset.add_argument("--to", required=True, choices=["latest", "earliest", "position"],
                       help="latest: the source's log end (skips); earliest: the oldest position the source keeps "
                            "(replays); position: the one given after it")
    reset.add_argument("--target", action="append", help="only this target (repeatable; default: every target)")
    reset.add_argument("position", nargs="?", help="with --to position: mysql-bin.000004:4663, 0/16B3748, or "
                                                   "a position's JSON as position.log shows it")
    reset.set_defaults(func=cmd_reset)
    ver = sub.add_parser("verify", help="compare each split's rows in source and target at one log position (a sync must "
                                        "be running); exit 1 when a split differs")
    ver.add_argument("--table", action="append", help="only this table (repeatable; default: every table)")
    ver.add_argument("--wait", type=float, default=120.0,
                     help="seconds to wait for the running sync's checkpoint (default 120); without a sync, verify "
                          "says so at once")
    ver.add_argument("--target", action="append", help="only this target (repeatable; default: every target)")
    ver.add_argument("--hold", action="store_true", help="hold each split's range on the source while comparing "
                     "(its writers wait); default: lock-free rounds")
    ver.set_defaults(func=cmd_verify)
    savepoint = sub.add_parser("savepoint", help="create, list, roll back to or delete a savepoint of the target "
                                                 "tables and the task's positions")
    actions = savepoint.add_subparsers(required=True, metavar="ACTION")
    for action, text in (("create", "tag the target tables' state and the checkpoint as NAME (copies no table)"),
                         ("rollback", "restore the target tables and the checkpoint to savepoint NAME; "
                                      "`sync` then replays the log from there"),
                         ("delete", "drop savepoint NAME and the before-images only it needs")):
        cmd = actions.add_parser(action, help=text)
        cmd.add_argument("name", metavar="NAME")
        cmd.add_argument("--target", action="append", help="only this target (repeatable; default: every target)")
        cmd.set_defaults(func=cmd_savepoint, action=action)
    listing = actions.add_parser("list", help="the task's savepoints, oldest first, and the before-images held, "
                                              "per target")
    listing.add_argument("--target", action="append", help="only this target (repeatable; default: every target)")
    listing.set_defaults(func=cmd_savepoint, action="list", name=None)
    check = sub.add_parser("check", help="load every task file as the code location does (a file, or each of a "
                                         "folder's); one line per file: ok, or its error; exit 2 if any does not load")
    check.add_argument("--config", dest="check_path", metavar="PATH_OR_DIR",
                       help=f"a task file or a folder of them (default: --config before the command, or ${CONFIG_ENV})")
    check.set_defaults(func=cmd_check)
    pos = sub.add_parser("positions", help="print the position records as JSON lines, then the log headroom")
    pos.set_defaults(func=cmd_positions)
    demo = sub.add_parser("demo", help="start local MariaDB+PostgreSQL, seed a demo schema, snapshot it")
    demo.add_argument("--dir", default=".cdc-demo", help="folder for servers, config and state")
    demo.add_argument("--rows", type=int, default=200_000, help="rows in the largest demo table")
    demo.set_defaults(func=cmd_demo)
    ui = sub.add_parser("ui", help="the Dagster UI of the task: webserver and daemon as `dagster dev` starts them, "
                                   "the daemon looking at new backfills every second instead of every 30 s")
    ui.add_argument("--host", default="127.0.0.1", help="the webserver's address (default 127.0.0.1)")
    ui.add_argument("--port", type=int, default=3000, help="the webserver's port (default 3000)")
    ui.add_argument("--backfill-interval", type=float, default=1.0,
                    help="seconds between the backfill daemon's looks at backfills (default 1; Dagster's own: 30)")
    ui.add_argument("--workspace", help="a workspace.yaml of your own (default: one code location, "
                                        "cdc_assets.definitions)")
    ui.set_defaults(func=cmd_ui)
    connect = sub.add_parser("spark-connect-server", help="run a long-lived Spark Connect server on loopback (local[*], "
                                                          "the JDBC jars) that tasks with spark.remote attach to")
    connect.add_argument("--port", type=int, default=15002, help="its port on 127.0.0.1 (default 15002)")
    connect.add_argument("--dir", default=".cdc-spark-connect", help="folder for its log and temp files")
    connect.add_argument("--driver-memory", default="2g")
    connect.set_defaults(func=cmd_spark_connect_server)
    return p


def _quiet_libraries() -> None:
    """What the CLI prints is its own: the libraries' warnings say nothing a user of the CLI can act on."""
    import logging
    import warnings

    warnings.simplefilter("ignore")
    os.environ["PYTHONWARNINGS"] = "ignore"  # Spark's Python workers too
    logging.getLogger("py4j").setLevel(logging.ERROR)


def _config(args) -> tuple[TaskConfig, str]:
    from cdc_assets.spark.session import JVM_STDERR_ENV

    config = load_config(args.config)
    if args.verbose:
        os.environ.pop(JVM_STDERR_ENV, None)  # inherited from a quiet parent: --verbose means the terminal
    else:
        os.environ.setdefault(JVM_STDERR_ENV, str(config.log_dir / "spark.log"))
    return config, str(Path(args.config or os.environ[CONFIG_ENV]).resolve())


def _instance(config: TaskConfig):
    from cdc_assets.defs.snapshot_run import cli_instance

    return cli_instance(dagster_home(config.data_dir))


def cmd_plan(args) -> int:
    from cdc_assets.defs.partitions import register
    from cdc_assets.engine.planning import ensure_plans
    from cdc_assets.engine.runtime import TaskRuntime

    config, _ = _config(args)
    runtime = TaskRuntime(config)
    try:
        plans = ensure_plans(runtime, replan=args.replan)
    finally:
        runtime.close()
    instance = _instance(config)
    added = register(instance, config.task_id, [p.plan for p in plans])
    for tp in plans:
        plan = tp.plan
        state = "planned now" if tp.created else "existing plan kept (re-plan with --replan)"
        print(f"{plan.table}: plan {plan.plan_id}, {len(plan.splits)} splits on '{plan.split_column}', {state}")
        for s in plan.splits:
            print(f"  {s.id}  {s.range}  ~{s.estimated_rows} rows")
    for note in runtime.capture_notes:
        print(note)
    print(f"{added} partitions added to the Dagster instance at {os.environ['DAGSTER_HOME']}")
    if args.replan:
        print("re-planned: plans, positions and the checkpoint were discarded. The target tables are kept: each "
              "split's commit replaces its key range, so rows the source deleted meanwhile go as the splits are "
              "read again; the log phase starts again once every split is finished")
    return 0


def cmd_snapshot(args) -> int:
    from cdc_assets.engine.early_spark import EarlySpark

    config, path = _config(args)
    spark = EarlySpark(config)  # the JVM starts while Dagster is imported and the plans are made
    try:
        from cdc_assets.defs.snapshot_run import run_snapshot

        instance = _instance(config)
        report = run_snapshot(config, path, instance, spark_ready=spark.ready)
    finally:
        spark.wait()
    for line in report.lines():
        print(line)
    if report.unfinished:
        print(f"error: {report.reason()}", file=sys.stderr)
        return 1
    return 0


def cmd_sync(args) -> int:
    import logging

    from cdc_assets.engine import savepoints
    from cdc_assets.engine.incremental import sync
    from cdc_assets.engine.runtime import TaskRuntime
    from cdc_assets.engine.savepoints import task_lease

    config, _ = _config(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    runtime = TaskRuntime(config)
    saved = None
    try:
        # The lease is held until the savepoint is taken: no batch in between. A signal stops the wait for it at
        # once; once it is held, at the end of the batch in hand (interrupts.py).
        with task_lease(runtime, doing="sync"), interrupts.deferred(_stopping_sync(args.savepoint_on_stop)):
            report = sync(runtime, until_caught_up=args.until_caught_up, stop=interrupts.requested(),
                          on_batch=lambda r: print(f"batch {r.batches}: {r.events} changes, checkpoint {r.checkpoint}",
                                                   file=sys.stderr) if r.batches % 100 == 1 else None)
            saved = savepoints.create_on(runtime, args.savepoint_on_stop) if args.savepoint_on_stop else None
            for line in report.lines() + [line for r in saved or [] for line in r.lines()]:  # before `deferred`'s stop
                print(line)
    except Interrupted as exc:
        if args.savepoint_on_stop and saved is None and not exc.told:
            interrupts.say(f"{exc.line('sync')}; savepoint {args.savepoint_on_stop} was not taken: `cdc-assets "
                           f"savepoint create {args.savepoint_on_stop}` takes it once no sync runs")
            exc.told = True
        raise
    finally:
        runtime.close()
    return 0


def _stopping_sync(savepoint: str | None) -> str:
    then = f", then creates savepoint {savepoint}" if savepoint else ""
    return f"sync stops once the batch in hand is applied and checkpointed{then}; `cdc-assets sync` goes on from there"


def cmd_savepoint(args) -> int:
    from cdc_assets.engine import savepoints, target_savepoints
    from cdc_assets.engine.runtime import TaskRuntime

    config, _ = _config(args)
    runtime = TaskRuntime(config)
    try:
        if args.action == "list":
            for lane in runtime.lanes_named(args.target):
                on = f"target {lane.name}: " if len(runtime.lanes) > 1 else ""
                every = target_savepoints.list_savepoints(lane)
                for sp in every:
                    print(on + sp.line())
                if not every:
                    print(f"target {lane.name} has no savepoints" if on else f"task {config.task_id} has no savepoints")
                for table, images in target_savepoints.storage(lane).items():
                    print(f"{on}before-images held for {table}: {images} rows")
            return 0
        action = {"create": savepoints.create_on, "rollback": savepoints.rollback_on, "delete": savepoints.delete_on}
        reports = action[args.action](runtime, args.name, args.target)
    finally:
        runtime.close()
    for line in (line for report in reports for line in report.lines()):
        print(line)
    if args.action == "rollback":
        print("run `cdc-assets sync` to replay the log from the savepoint's position")
    return 0


def cmd_reset(args) -> int:
    import getpass
    import socket

    from cdc_assets.core.positions import parse_position
    from cdc_assets.engine.reset import reset_targets
    from cdc_assets.engine.runtime import TaskRuntime

    config, _ = _config(args)
    if (args.to == "position") != (args.position is not None):
        raise CdcError(f"reset --to {args.to} {'needs' if args.to == 'position' else 'takes no'} position",
                       "cdc-assets reset --to position mysql-bin.000004:4663 (or 0/16B3748, or a position's JSON)")
    position = parse_position(args.position, config.source.db_type) if args.position else None
    runtime = TaskRuntime(config)
    try:
        results = reset_targets(runtime, args.to, f"{getpass.getuser()}@{socket.gethostname()} (cdc-assets reset)",
                                position, args.target)
    finally:
        runtime.close()
    for line in (line for result in results for line in result.lines()):
        print(line)
    return 0


def cmd_verify(args) -> int:
    from cdc_assets.core.tables import TableId
    from cdc_assets.engine.runtime import TaskRuntime
    from cdc_assets.engine.verify import FAILED, INCONCLUSIVE, summary_lines, verify_table
    from cdc_assets.engine.verify_sync import sync_state

    config, _ = _config(args)
    tables = [TableId.parse(t) for t in args.table] if args.table else config.source.table_ids
    unknown = [str(t) for t in tables if t not in config.source.table_ids]
    if unknown:
        raise CdcError(f"not a table of the task: {', '.join(unknown)}", "name a table of source.tables")
    runtime = TaskRuntime(config)
    try:
        lanes, checks = runtime.lanes_named(args.target), []
        for lane in lanes:  # each target on its own, its sync decided once: no split waits for one not there
            state = sync_state(lane, args.wait)
            if state.blocked and len(lanes) == 1:
                print(f"INCONCLUSIVE: {state.blocked}")
                return 3
            checks += [c for t in tables for c in verify_table(lane, t, wait_secs=args.wait, state=state,
                                                                  hold=args.hold)]
    finally:
        runtime.close()
    for line in summary_lines(checks):
        print(line)
    statuses = {c.status for c in checks}
    retries = sum(c.retries for c in checks)
    busy = f"; the source refused the hold {retries} times (deadlock or lock wait timeout), retried" if retries else ""
    print(f"{sum(c.status == 'passed' for c in checks)}/{len(checks)} splits equal{busy}")
    return 1 if FAILED in statuses else 3 if INCONCLUSIVE in statuses else 0


def cmd_check(args) -> int:
    from cdc_assets.task_files import check

    lines, broken = check(args.check_path or args.config)
    print("\n".join(lines))
    return 2 if broken else 0


def cmd_positions(args) -> int:
    from cdc_assets.engine.headroom import task_headroom
    from cdc_assets.engine.runtime import TaskRuntime

    config, _ = _config(args)
    runtime = TaskRuntime(config)
    try:
        for lane in runtime.lanes:  # each target's own records (task_id `<task>.<target>` after the first)
            try:
                records = lane.resumer.records()
            except UnreachableError as exc:
                print(json.dumps({"target": lane.name, "error": exc.message}, sort_keys=True))
                continue
            for record in records:
                print(json.dumps(record.to_json(), sort_keys=True))
        headroom = task_headroom(runtime)
        print(json.dumps({"headroom": headroom.level.value, "text": str(headroom), **headroom.figures}, sort_keys=True))
    finally:
        runtime.close()
    return 0


if __name__ == "__main__":
    run()
