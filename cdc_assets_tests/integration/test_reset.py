"""`cdc-assets reset` and the reset job on the real servers: latest skips exactly the changes before it, earliest
and a given position replay and converge, every reset leaves a record (who, when, from, to) in the position table
and position.log, and a position the log no longer has is refused with the way out."""
import json
import subprocess
import time

import dagster as dg
import pytest

from cdc_assets.config import load_config
from cdc_assets.defs.build import build_definitions
from cdc_assets.engine.incremental import sync
from cdc_assets.core.positions import parse_position
from cdc_assets.engine.reset import reset_checkpoint
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.task_lock import LOCK_FILE
from cdc_assets.errors import ConfigError, PlanError, PositionLost
from cdc_assets.resumer.records import CDC_RESET
from cdc_assets_tests.support import cli_command, execute, fetch_rows, postgres_target, source_database, write_config


@pytest.fixture
def task(servers, unique_name, tmp_path, request):
    """(config path, source connection, target connection, table SQL in the target, source kind); the table
    starts with `seed` rows; the task starts at the log end (startup_mode latest) and has synced once."""
    kind, seed = request.param
    statements = ["CREATE TABLE t (id INT PRIMARY KEY, v INT)"] + (
        [f"INSERT INTO t VALUES {', '.join(f'({i}, {i})' for i in range(1, seed + 1))}"] if seed else [])
    target = f"{unique_name}_tgt"
    tgt = postgres_target(servers, target)
    namespace = unique_name if kind == "mysql" else "public"
    with source_database(servers, kind, unique_name, statements) as src:
        path = write_config(tmp_path, servers, task_id="reset_t", source=kind, source_db=unique_name,
                            tables=[f"{namespace}.t"], target="postgres", target_db=target,
                            pipeline={"startup_mode": "latest", "schema_change_policy": "ignore"})
        rt = runtime(path)
        rt.sink.ensure_table(rt.source.describe(rt.config.source.table_ids[0]))
        sync(rt, until_caught_up=True)
        rt.close()
        yield path, src, tgt, f'"{namespace}".t', kind
    tgt.close()


def runtime(path) -> TaskRuntime:
    return TaskRuntime(load_config(path))


def synced(path):
    rt = runtime(path)
    try:
        return sync(rt, until_caught_up=True)
    finally:
        rt.close()


def checkpoint(path):
    rt = runtime(path)
    try:
        return rt.resumer.checkpoint()
    finally:
        rt.close()


def cli(path, *args, ok=True) -> subprocess.CompletedProcess:
    done = subprocess.run(cli_command(path, *args), capture_output=True, text=True, timeout=300)
    assert (done.returncode == 0) == ok, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def resets(path) -> list[dict]:
    records = [json.loads(line) for line in cli(path, "positions").stdout.splitlines()]
    return [r["position_data"] for r in records if r.get("resumer_type") == CDC_RESET]  # the last line is the headroom


@pytest.mark.parametrize("task", [("mysql", 0), ("postgres", 0)], indirect=True, ids=["mysql", "postgres"])
def test_reset_to_latest_skips_exactly_the_changes_before_it(task):
    path, src, tgt, table, _ = task
    execute(src, "INSERT INTO t VALUES (10, 10)", "INSERT INTO t VALUES (11, 11)")
    assert synced(path).events == 2
    before = checkpoint(path).position
    # While the task is stopped: changes the reset skips.
    execute(src, "INSERT INTO t VALUES (20, 20)", "UPDATE t SET v = -10 WHERE id = 10", "DELETE FROM t WHERE id = 11")
    done = cli(path, "reset", "--to", "latest")
    after = checkpoint(path).position
    assert f"{before} -> {after}" in done.stdout
    assert f"warning: the changes from {before} to {after}" in done.stdout and "are never applied" in done.stdout
    # After the reset: changes applied as usual.
    execute(src, "INSERT INTO t VALUES (30, 30)", "UPDATE t SET v = -30 WHERE id = 30", "INSERT INTO t VALUES (31, 31)")
    report = synced(path)
    assert report.start == str(after) and report.events == 3
    # The target lacks exactly the skipped changes: no row 20, row 10 not negated, row 11 not deleted.
    assert fetch_rows(tgt, table, "id") == [(10, 10), (11, 11), (30, -30), (31, 31)]
    assert fetch_rows(src, "t", "id") == [(10, -10), (20, 20), (30, -30), (31, 31)]

    [record] = resets(path)
    assert record["to"] == "latest" and record["effect"] == "skips" and "(cdc-assets reset)" in record["by"]
    assert record["from"] == before.to_json() and record["to_position"] == after.to_json() and record["at"]
    assert record["log_bytes"] > 0
    lines = [line for line in (load_config(path).log_dir / "position.log").read_text().splitlines()
             if " | reset | " in line]
    assert len(lines) == 1 and json.loads(lines[0].split(" | ", 2)[2])["to_position"] == after.to_json()


@pytest.mark.parametrize("task", [("mysql", 0)], indirect=True, ids=["mysql"])
def test_reset_to_a_position_replays_exactly_from_there_and_converges(task):
    path, src, tgt, table, _ = task
    start = checkpoint(path).position
    execute(src, "INSERT INTO t SELECT seq, 0 FROM seq_1_to_20")  # 20 changes
    assert synced(path).events == 20
    middle = checkpoint(path).position
    execute(src, "UPDATE t SET v = id WHERE id <= 5", "DELETE FROM t WHERE id > 17")  # 5 + 3 changes
    assert synced(path).events == 8
    want = fetch_rows(src, "t", "id")
    assert fetch_rows(tgt, table, "id") == want

    execute(tgt, f"DELETE FROM {table}")  # the target lost everything: replay all of it
    done = cli(path, "reset", "--to", "position", json.dumps(start.to_json()))  # as position.log shows it
    assert "are applied to the target again" in done.stdout
    report = synced(path)
    assert report.start == str(start) and report.events == 28
    assert fetch_rows(tgt, table, "id") == want

    execute(tgt, f"UPDATE {table} SET v = 99")
    cli(path, "reset", "--to", "position", f"{middle.file}:{middle.pos}")  # the text form
    assert synced(path).events == 8  # exactly the second stretch
    assert [r for r in fetch_rows(tgt, table, "id") if r[0] <= 5] == want[:5]  # the rows it changed are right again
    assert [record["to"] for record in resets(path)] == ["position", "position"]


@pytest.mark.parametrize("task", [("mysql", 30)], indirect=True, ids=["mysql"])
def test_reset_job_to_earliest_replays_the_whole_log_and_converges(task):
    path, src, tgt, table, _ = task
    execute(src, "UPDATE t SET v = -v WHERE id <= 10", "DELETE FROM t WHERE id > 25", "INSERT INTO t VALUES (99, 99)")
    synced(path)
    assert len(fetch_rows(tgt, table, "id")) == 11  # the seed rows predate the start (latest)

    config = load_config(path)
    defs = build_definitions(config, str(path))
    job = defs.get_job_def("reset_t_reset")
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(instance=instance, run_config={
            "ops": {"reset_t_reset_checkpoint": {"config": {"to": "earliest"}}}})
        assert result.success
        [materialization] = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
        metadata = materialization.event_specific_data.metadata
        assert metadata["effect"].value == "replays" and metadata["log_bytes"].value > 0
        assert metadata["by"].value == f"dagster run {result.run_id}"
        assert result.dagster_run.tags["cdc_assets/incremental_task"] == "reset_t"  # one run per task in the queue
    report = synced(path)
    assert report.events >= 30 + 10 + 5 + 1  # the seed, then every change since: the CREATE TABLE was ignored
    assert fetch_rows(tgt, table, "id") == fetch_rows(src, "t", "id")
    [record] = resets(path)
    assert record["to"] == "earliest" and record["by"].startswith("dagster run ")


@pytest.mark.parametrize("task", [("mysql", 0)], indirect=True, ids=["mysql"])
def test_a_position_the_binlog_no_longer_has_is_refused_with_the_way_out(task):
    path, _, _, _, _ = task
    before = checkpoint(path)
    done = cli(path, "reset", "--to", "position", "mysql-bin.000000:4", ok=False)  # older than the oldest file kept
    assert "mysql-bin.000000:4 is no longer in the source's log" in done.stderr
    assert "reset --to earliest" in done.stderr and "plan --replan" in done.stderr
    done = cli(path, "reset", "--to", "position", "mysql-bin.999999:4", ok=False)
    assert "is past the source's log end" in done.stderr
    assert "cannot read the position" in cli(path, "reset", "--to", "position", "0/16B3748", ok=False).stderr
    assert "needs position" in cli(path, "reset", "--to", "position", ok=False).stderr
    assert checkpoint(path) == before and resets(path) == []


@pytest.mark.parametrize("task", [("postgres", 0)], indirect=True, ids=["postgres"])
def test_a_running_sync_holds_the_checkpoint_so_a_reset_is_refused_until_it_stops(task):
    """Without the task's lock the running sync would write its next checkpoint over the reset's."""
    path, src, tgt, table, _ = task
    following = subprocess.Popen(cli_command(path, "sync"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        lock = load_config(path).data_dir / f"reset_t.{LOCK_FILE}"
        deadline = time.monotonic() + 120
        while not (lock.exists() and lock.read_text().startswith("sync")):
            assert following.poll() is None and time.monotonic() < deadline, following.stderr.read()[-2000:]
            time.sleep(0.2)
        execute(src, "INSERT INTO t VALUES (1, 1)")
        refused = cli(path, "reset", "--to", "latest", ok=False)
        assert f"reset_t: sync (pid {following.pid}) holds its checkpoint" in refused.stderr
        assert resets(path) == []
    finally:
        following.terminate()
        following.wait(60)
    cli(path, "reset", "--to", "latest")
    assert len(resets(path)) == 1


@pytest.mark.parametrize("task", [("postgres", 0)], indirect=True, ids=["postgres"])
def test_a_position_the_slot_confirmed_past_is_refused(task):
    path, src, _, _, _ = task
    old = checkpoint(path).position
    execute(src, "INSERT INTO t VALUES (1, 1)")
    synced(path)  # the slot is acknowledged up to the new checkpoint
    rt = runtime(path)
    try:
        with pytest.raises(PositionLost, match=rf"position {old} is no longer in the source's log") as err:
            reset_checkpoint(rt, "position", "test", parse_position(str(old), "postgres"))
        assert "replication slot confirmed past it" in str(err.value) and "plan --replan" in str(err.value)
        assert rt.resumer.checkpoint().position != old
    finally:
        rt.close()


def test_a_task_without_a_checkpoint_is_refused_naming_startup_mode(tmp_path, servers, unique_name):
    with source_database(servers, "mysql", unique_name, ["CREATE TABLE t (id INT PRIMARY KEY)"]):
        path = write_config(tmp_path, servers, task_id="reset_none", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target="postgres", target_db="postgres")
        rt = runtime(path)
        try:
            with pytest.raises(PlanError, match=r"has no checkpoint yet.*pipeline.startup_mode"):
                reset_checkpoint(rt, "latest", "test")
        finally:
            rt.close()


def test_positions_are_read_from_text_and_json():
    assert str(parse_position("mysql-bin.000004:4663", "mysql")) == "mysql-bin.000004:4663"
    parsed = parse_position('{"binlog_filename": "mysql-bin.000004", "next_event_position": 4663, "gtid_set": "0-1-12"}',
                            "mysql")
    assert (parsed.file, parsed.pos, parsed.gtid_set) == ("mysql-bin.000004", 4663, "0-1-12")
    assert str(parse_position('{"type": "PgCdc", "lsn": "0/16B3748"}', "postgres")) == "0/16B3748"
    assert str(parse_position("0/16b3748", "postgres")) == "0/16B3748"
    for text, kind in [("nonsense", "mysql"), ("mysql-bin.000004:4663", "postgres"), ('{"lsn": "0/1"}', "mysql")]:
        with pytest.raises(ConfigError, match="give it as MySQL: mysql-bin.000004:4663"):
            parse_position(text, kind)
