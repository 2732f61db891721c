"""Test helpers: configs pointing at the private servers, and row-by-row comparison of two tables."""
from __future__ import annotations

import datetime as dt
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from cdc_assets.config import TaskConfig, load_config


MONGO_URL = os.environ.get("CDC_TEST_MONGO_URL", "")
mongo = pytest.mark.skipif(
    not MONGO_URL,
    reason="CDC_TEST_MONGO_URL not set: no MongoDB replica set on this machine (MongoDB cannot be installed here); "
           "start one with docker/compose.yaml and set e.g. CDC_TEST_MONGO_URL=mongodb://127.0.0.1:27017/?directConnection=true")


def endpoint(servers, db_type: str, database: str) -> dict:
    server = servers.mariadb if db_type == "mysql" else servers.postgres
    url = server.url(database) if db_type == "postgres" else server.url()
    return {"db_type": db_type, "url": url}

MYSQL8_URL = os.environ.get("CDC_TEST_MYSQL8_URL", "")
mysql8 = pytest.mark.skipif(
    not MYSQL8_URL, reason="CDC_TEST_MYSQL8_URL not set: no MySQL 8 server on this machine (Debian ships MariaDB only); "
    "set it to a MySQL 8.0/8.4 URL with binlog on, e.g. the one docker/compose.yaml starts")


def write_config(tmp_path: Path, servers, *, task_id: str, source: str, source_db: str, tables: list[str],
                 target: str = "", target_db: str = "", target_server=None, targets: list[dict] | None = None,
                 **sections) -> Path:
    """`target_server`: another server than the session's one of the target's kind (MySQL -> MySQL); `targets`:
    a `targets:` list instead of the one target."""
    if targets is None:
        target_endpoint = endpoint(servers, target, target_db)
        if target_server is not None:
            target_endpoint["url"] = target_server.url(target_db) if target == "postgres" else target_server.url()
    raw = {
        "task_id": task_id,
        "source": {**endpoint(servers, source, source_db), "tables": tables, **sections.pop("source_extra", {})},
        **({"targets": targets} if targets is not None else {"target": target_endpoint}),
        "runtime": {"data_dir": str(tmp_path / "state")},
        "spark": {"master": "local[2]"},
        **sections,
    }
    path = tmp_path / f"{task_id}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def cli_command(config: Path, *args: str) -> list[str]:
    """`cdc-assets --config <config> <args>` as this interpreter runs it (tests run from a checkout)."""
    return [sys.executable, "-m", "cdc_assets.cli", "--config", str(config), *args]


def config_for(*args, **kwargs) -> TaskConfig:
    return load_config(write_config(*args, **kwargs))


def execute(conn, *statements: str) -> None:
    """Run statements one by one on a DBAPI connection (MariaDB or PostgreSQL)."""
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def run_transactions(conn, transactions) -> None:
    """Each string is one source transaction of ;-separated statements (autocommit connections)."""
    with conn.cursor() as cur:
        for tx in transactions:
            cur.execute("BEGIN")
            for statement in tx.split(";"):
                cur.execute(statement)
            cur.execute("COMMIT")


def fetch_rows(conn, table_sql: str, order_by: str) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table_sql} ORDER BY {order_by}")
        return [tuple(normalise(v) for v in row) for row in cur.fetchall()]


def normalise(value):
    """One comparable form for the values both drivers return for the same stored data."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value


@contextmanager
def source_database(servers, kind: str, name: str, statements: list[str]):
    """A fresh database on the MariaDB or PostgreSQL server with `statements` run in it; yields an
    autocommit connection. MySQL databases are dropped afterwards (PostgreSQL ones die with the server)."""
    server = servers.mariadb if kind == "mysql" else servers.postgres
    server.create_database(name)
    conn = server.connect(name)
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
    try:
        yield conn
    finally:
        if kind == "mysql":
            with conn.cursor() as cur:
                cur.execute(f"DROP DATABASE `{name}`")
        conn.close()


def postgres_target(servers, name: str):
    """A fresh target database on the private PostgreSQL; an autocommit connection to it."""
    servers.postgres.create_database(name)
    return servers.postgres.connect(name)


def snapshot_all(rt) -> None:
    """Plan the task's tables and snapshot every split, in process."""
    from cdc_assets.engine.planning import ensure_plans
    from cdc_assets.engine.snapshot import snapshot_splits

    for tp in ensure_plans(rt):
        snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])


@contextmanager
def mysql_table_task(servers, unique_name: str, tmp_path: Path, task_id: str, pipeline: dict):
    """A MySQL table `t (id, v)` captured from the log's end into a fresh PostgreSQL target (its table created):
    yields (config path, runtime, source connection, target connection)."""
    from cdc_assets.engine.runtime import TaskRuntime

    target = f"{unique_name}_tgt"
    tgt = postgres_target(servers, target)
    with source_database(servers, "mysql", unique_name, ["CREATE TABLE t (id INT PRIMARY KEY, v INT)"]) as src:
        path = write_config(tmp_path, servers, task_id=task_id, source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target="postgres", target_db=target,
                            pipeline={"startup_mode": "latest", **pipeline})
        rt = TaskRuntime(load_config(path))
        rt.sink.ensure_table(rt.source.describe(rt.config.source.table_ids[0]))
        try:
            yield path, rt, src, tgt
        finally:
            rt.close()
            tgt.close()


def three_target_source(servers, db: str):
    """The MariaDB table `<db>.t (id, v)` of `three_targets`, 30 rows; an autocommit connection to its database."""
    servers.mariadb.create_database(db)
    src = servers.mariadb.connect(db)
    with src.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO t SELECT seq, seq FROM seq_1_to_30")
    return src


def three_targets(tmp_path: Path, servers, mariadb_target, db: str, task_id: str, **sections) -> Path:
    """A task file: the MariaDB table `<db>.t` into three targets, pg_a and pg_b (PostgreSQL databases `<db>_a`,
    `<db>_b`, created here) and maria (the second MariaDB)."""
    for name in ("a", "b"):
        servers.postgres.create_database(f"{db}_{name}")
    path = tmp_path / f"{task_id}.yaml"
    path.write_text(yaml.safe_dump({
        "task_id": task_id,
        "source": {"db_type": "mysql", "url": servers.mariadb.url(), "tables": [f"{db}.t"]},
        "targets": [
            {"name": "pg_a", "db_type": "postgres", "url": servers.postgres.url(f"{db}_a")},
            {"name": "pg_b", "db_type": "postgres", "url": servers.postgres.url(f"{db}_b")},
            {"name": "maria", "db_type": "mysql", "url": mariadb_target.url()},
        ],
        "runtime": {"data_dir": str(tmp_path / "state")},
        "spark": {"master": "local[2]"},
        **sections,
    }))
    return path
