"""`cdc-assets demo`: local servers, a seeded shop schema, a config, the snapshot into PostgreSQL, then changes to
the source and the incremental phase up to the source's log end."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from cdc_assets.dev import demo_schema
from cdc_assets.dev.servers import attach, start_servers

PASSWORD_ENV = "CDC_SRC_PASSWORD"


def run_demo(base_dir: Path, rows: int) -> int:
    base_dir.mkdir(parents=True, exist_ok=True)
    servers = attach(base_dir / "servers") or start_servers(base_dir / "servers")
    mariadb, postgres = servers
    print(f"MariaDB on 127.0.0.1:{mariadb.port}, PostgreSQL on 127.0.0.1:{postgres.port} (data in {base_dir / 'servers'})")
    _seed(mariadb, rows)
    postgres.create_database("warehouse")
    config = _write_config(base_dir, mariadb.port, postgres.port)
    os.environ.setdefault(PASSWORD_ENV, mariadb.password)
    _write_env_file(base_dir, config)
    os.environ["DAGSTER_HOME"] = str(base_dir / "dagster_home")
    code = _cli(config, "snapshot")
    if code == 0:
        _change(mariadb, rows)
        code = _cli(config, "sync", "--until-caught-up")
    print(
        "\nOpen the same task in Dagster (the .env file there holds the settings and the demo password):\n"
        f"  cd {base_dir} && DAGSTER_HOME={base_dir / 'dagster_home'} cdc-assets ui\n"
        f"  (or `dagster dev -m cdc_assets.definitions` there: the same, with backfills looked at every 30 s)\n"
        f"Stop the servers: python -m cdc_assets.dev.servers stop {base_dir / 'servers'}"
    )
    return code


def _cli(config: Path, *args: str) -> int:
    """The commands a user would type, in a process of their own: the demo shows the CLI, and dev/ stays below
    cli.py (cli.py runs the demo), so neither imports the other."""
    command = [sys.executable, "-m", "cdc_assets.cli", "--config", str(config), *args]
    print("$ cdc-assets " + " ".join(command[3:]), flush=True)
    return subprocess.run(command, env=os.environ.copy()).returncode


def _change(mariadb, rows: int) -> None:
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"USE {demo_schema.DATABASE}")  # where seq_1_to_N resolves
            for statement in demo_schema.changes(rows):
                cur.execute(statement)
    finally:
        conn.close()
    print("changed the source after the snapshot; now the incremental phase carries the changes over:")


def _write_env_file(base_dir: Path, config: Path) -> None:
    """`dagster dev` reads .env from its working directory: the password stays out of shell history."""
    env = base_dir / ".env"
    env.write_text(f"{PASSWORD_ENV}={os.environ[PASSWORD_ENV]}\nCDC_ASSETS_CONFIG={config}\n")
    env.chmod(0o600)


def _seed(mariadb, rows: int) -> None:
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            for statement in demo_schema.ddl():
                cur.execute(statement)
            cur.execute(f"USE {demo_schema.DATABASE}")  # the seq_1_to_N tables live in "the current database"
            cur.execute("SELECT COUNT(*) FROM shop.orders")
            if cur.fetchone()[0] >= rows:
                return
            for statement in demo_schema.seed(rows):
                cur.execute(statement)
            for table in demo_schema.TABLES:
                cur.execute(f"ANALYZE TABLE {table}")
                cur.fetchall()
    finally:
        conn.close()
    print(f"seeded {', '.join(demo_schema.TABLES)}")


def _write_config(base_dir: Path, mysql_port: int, pg_port: int) -> Path:
    config = {
        "task_id": "demo_shop",
        "source": {"db_type": "mysql", "url": f"mysql://cdc:${{{PASSWORD_ENV}}}@127.0.0.1:{mysql_port}",
                   "tables": demo_schema.TABLES},
        "target": {"db_type": "postgres", "url": f"postgresql://postgres@127.0.0.1:{pg_port}/warehouse"},
        "snapshot": {"split_size": 50_000, "partitions_per_run": 16},
        "resumer": {"resume_type": "sqlite"},
        "runtime": {"data_dir": "./state", "log_dir": "./state/logs"},
        "spark": {"master": "local[*]"},
    }
    path = base_dir / "cdc_assets.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
