"""A split that fails inside Spark (a Python worker's COPY) or in the target's commit is reported in one line with the
database's own message and where it happened (table, splits, column when known), in the CLI's last line and in
the position records; the whole trace goes to errors.log."""
import json
import os
import subprocess
import sys

import pytest

from cdc_assets.config import load_config
from cdc_assets.resumer.logfile import POSITION_LOG
from cdc_assets_tests.support import write_config

CASES = {
    # MySQL text may hold NUL; PostgreSQL text cannot: the COPY in the Python worker fails on split 1.
    "postgres": ("mysql", "CREATE TABLE t (id INT PRIMARY KEY, code TEXT)",
                 "INSERT INTO t SELECT seq, IF(seq = 77, 'a\\0b', 'ok') FROM seq_1_to_100",
                 ['invalid byte sequence for encoding "UTF8": 0x00', "in a Spark Python worker"]),
    # Unconstrained numeric lands in DECIMAL(65,30): 1e70 does not fit, the commit's insert fails on split 1.
    "mysql": ("postgres", "CREATE TABLE {ns}.t (id INT PRIMARY KEY, n NUMERIC)",
              "INSERT INTO {ns}.t SELECT g, CASE WHEN g = 77 THEN 1e70 ELSE g END FROM generate_series(1, 100) g",
              ["Out of range value for column 'n'", "in the target's commit"]),
}


@pytest.mark.parametrize("target", ["postgres", "mysql"])
def test_a_split_failing_inside_spark_is_one_line_with_the_database_message(tmp_path, servers, mariadb_target,
                                                                             unique_name, target):
    source, create, insert, expected = CASES[target]
    ns = unique_name
    server = servers.mariadb if source == "mysql" else servers.postgres
    server.create_database(unique_name)
    src = server.connect(unique_name)
    with src.cursor() as cur:
        if source == "postgres":
            cur.execute(f"CREATE SCHEMA {ns}")
        cur.execute(create.format(ns=ns))
        cur.execute(insert.format(ns=ns))
    src.close()
    extra = {"target_server": mariadb_target} if target == "mysql" else {}
    target_db = f"{unique_name}_tgt" if target == "postgres" else ""
    if target == "postgres":
        servers.postgres.create_database(target_db)
    path = write_config(tmp_path, servers, task_id="split_err", source=source, source_db=unique_name,
                        tables=[f"{ns}.t"], target=target, target_db=target_db, snapshot={"split_size": 50}, **extra)
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    proc = subprocess.run([sys.executable, "-m", "cdc_assets.cli", "--config", str(path), "snapshot"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    for text in [*expected, f"{ns}.t:0001 of {ns}.t failed"]:
        assert text in last, last
    assert "Traceback" not in last and "at org.apache" not in last and len(last) < 700, last

    log_dir = load_config(path).log_dir
    assert expected[0] in (log_dir / "errors.log").read_text()
    failed = [json.loads(line.split(" | ", 2)[2]) for line in (log_dir / POSITION_LOG).read_text().splitlines()
              if '"FAILED"' in line]
    [record] = [r for r in failed if r["position_key"] == f"{ns}.t:0001"]
    assert expected[0] in record["error"] and record["phase"] == "FAILED"
