"""The CLI's commands that start servers and wait until stopped (the demo, the Dagster UI, a Spark Connect server),
and where the CLI keeps its Dagster instance."""
from __future__ import annotations

import os
from pathlib import Path

from cdc_assets.config import CONFIG_ENV, load_config
from cdc_assets.interrupts import Interrupted


def dagster_home(data_dir: Path) -> Path:
    # Without DAGSTER_HOME Dagster uses a throwaway instance, and the partitions would vanish with it.
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(data_dir / "dagster_home")))
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        # The repository's instance settings (run queue limits, run retries) when we run from a checkout.
        shipped = Path(__file__).resolve().parents[1] / "dagster.yaml"
        (home / "dagster.yaml").write_text(shipped.read_text() if shipped.exists() else "")
    return home


def cmd_demo(args) -> int:
    from cdc_assets.dev.demo import run_demo

    return run_demo(Path(args.dir).resolve(), rows=args.rows)


def cmd_ui(args) -> int:
    from dotenv import load_dotenv

    from cdc_assets.dev.dagster_ui import DagsterUi, ui_env

    # `.env` where not set already, as Dagster's processes read it from their working directory (the demo keeps
    # its password and CDC_ASSETS_CONFIG there); before the config.
    load_dotenv(".env", override=False)
    args.config = args.config or os.environ.get(CONFIG_ENV)
    config_path = None
    if args.config:  # checked before anything starts, as the code location will read it
        config, config_path = load_config(args.config), str(Path(args.config).resolve())
        home = dagster_home(config.data_dir)
    else:
        home = dagster_home(Path(".cdc").resolve())
    ui = DagsterUi(home, ui_env(home, config_path), args.host, args.port, args.backfill_interval,
                   Path(args.workspace).resolve() if args.workspace else None)
    try:
        ui.start()
        print(f"Dagster UI at {ui.url} (DAGSTER_HOME {home}; the backfill daemon looks every "
              f"{args.backfill_interval:g} s; logs: {home}/webserver.log, {home}/daemon.log); Ctrl-C stops it",
              flush=True)
        return ui.wait()
    except Interrupted:  # SIGINT/SIGTERM: how the UI is stopped; both process groups stop on the way out
        return 0
    finally:
        ui.stop()


def cmd_spark_connect_server(args) -> int:
    from cdc_assets.dev.spark_connect import SparkConnectServer

    server = SparkConnectServer(Path(args.dir).resolve(), port=args.port, driver_memory=args.driver_memory)
    try:
        server.start()
        print(f"Spark Connect server at {server.url} (log: {server.log}); set spark.conf spark.remote: {server.url}",
              flush=True)
        return server.wait()
    except Interrupted:  # SIGINT/SIGTERM: how the server is stopped; its process group stops on the way out
        return 0
    finally:
        server.stop()
