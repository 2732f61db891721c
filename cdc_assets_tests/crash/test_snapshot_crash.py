"""SIGKILL `cdc-assets snapshot` once some splits are finished, run it again, and check that the target
equals the source row by row and that no split finished before the kill was read a second time."""
import os
import signal
import sqlite3
import subprocess
import time

import pytest

from cdc_assets.config import load_config
from cdc_assets.resumer.logfile import POSITION_LOG
from cdc_assets_tests.support import cli_command, fetch_rows, write_config

pytestmark = [pytest.mark.crash, pytest.mark.spark]  # `cdc-assets snapshot` in processes of their own
ROWS, SPLIT = 12_000, 1_000


def finished_in_store(config) -> set[str]:
    path = config.data_dir / "positions.sqlite"
    if not path.exists():
        return set()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute("SELECT position_key FROM task_position WHERE resumer_type = 'SnapshotFinished'").fetchall()
    except sqlite3.OperationalError:
        return set()
    finally:
        conn.close()
    return {r[0] for r in rows}


def run_cli(config_path, env, *args, **popen):
    return subprocess.Popen(cli_command(config_path, *args), env=env, start_new_session=True, **popen)


@pytest.mark.parametrize("kill_after_finished", [3])
def test_sigkill_mid_snapshot_then_resume_loses_nothing_and_rereads_nothing(
        tmp_path, servers, unique_name, kill_after_finished):
    servers.mariadb.create_database(unique_name)
    src = servers.mariadb.connect(unique_name)
    with src.cursor() as cur:
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, amount DECIMAL(12,2), note VARCHAR(64), at DATETIME(6))")
        cur.execute(f"INSERT INTO orders SELECT seq, seq / 7, CONCAT('n', seq), TIMESTAMP('2024-01-01') + INTERVAL seq SECOND "
                    f"FROM seq_1_to_{ROWS}")
    target = f"{unique_name}_tgt"
    servers.postgres.create_database(target)
    path = write_config(tmp_path, servers, task_id="crash_snap", source="mysql", source_db=unique_name,
                        tables=[f"{unique_name}.orders"], target="postgres", target_db=target,
                        snapshot={"split_size": SPLIT, "partitions_per_run": 1})
    config = load_config(path)
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}

    proc = run_cli(path, env, "snapshot", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while len(finished_in_store(config)) < kill_after_finished:
        assert proc.poll() is None, "snapshot ended before it could be killed"
        assert time.monotonic() < deadline, "no split finished in time"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before_kill = finished_in_store(config)
    assert 0 < len(before_kill) < ROWS // SPLIT, "the kill must land mid-snapshot"

    again = run_cli(path, env, "snapshot", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = again.communicate(timeout=600)
    assert again.returncode == 0, out

    tgt = servers.postgres.connect(target)
    assert fetch_rows(tgt, f'"{unique_name}".orders', "id") == fetch_rows(src, "orders", "id")
    log = (config.log_dir / POSITION_LOG).read_text().splitlines()
    for split in before_kill:
        lows = [ln for ln in log if f'"position_key": "{split}"' in ln and '"LOW_RECORDED"' in ln]
        assert len(lows) == 1, f"{split} finished before the kill but was read again"
    assert len(finished_in_store(config)) == ROWS // SPLIT
    tgt.close()
    src.close()


@pytest.mark.parametrize("key", ["int", "text"])
def test_sigkill_between_target_commit_and_finished_marker_leaves_no_ghost_rows(tmp_path, servers, unique_name, key):
    """sqlite positions: the first group committed in the target but was never marked finished. Rows deleted at
    the source before the rerun must leave the target when the rerun reads the group again."""
    servers.mariadb.create_database(unique_name)
    src = servers.mariadb.connect(unique_name)
    key_sql = "CONCAT(IF(seq % 2, 'k', 'K'), LPAD(seq, 5, '0'))" if key == "text" else "seq"
    with src.cursor() as cur:
        cur.execute(f"CREATE TABLE t (id {'VARCHAR(20)' if key == 'text' else 'INT'} PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO t SELECT {key_sql}, seq FROM seq_1_to_4000")
    target = f"{unique_name}_tgt"
    servers.postgres.create_database(target)
    path = write_config(tmp_path, servers, task_id="crash_ghost", source="mysql", source_db=unique_name,
                        tables=[f"{unique_name}.t"], target="postgres", target_db=target,
                        snapshot={"split_size": 500, "partitions_per_run": 8}, resumer={"resume_type": "sqlite"})
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home"), "CDC_ASSETS_CRASH_AT": "snapshot.after_commit"}
    proc = run_cli(path, env, "snapshot", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, out[-3000:]
    tgt = servers.postgres.connect(target)
    committed = fetch_rows(tgt, f'"{unique_name}".t', "id")
    assert committed and not finished_in_store(load_config(path))  # in the target, finished nowhere

    with src.cursor() as cur:  # deletes inside the committed group's ranges, while no run reads
        cur.execute("DELETE FROM t WHERE v % 10 = 3")
    del env["CDC_ASSETS_CRASH_AT"]
    again = run_cli(path, env, "snapshot", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = again.communicate(timeout=600)
    assert again.returncode == 0, out[-3000:]
    assert sorted(fetch_rows(tgt, f'"{unique_name}".t', "id")) == sorted(fetch_rows(src, "t", "id"))
    tgt.close()
    src.close()
