"""An operator stops a command: Ctrl-C (SIGINT to the process group, as a terminal sends it) or SIGTERM (to the
process, as `kill` does). Every command stops promptly, says so in one line with the way on, no traceback and no
password, exits 130 / 143, and leaves nothing half-done: a snapshot's splits are each committed or not, a sync's
batches each applied and checkpointed or not; the command run again ends with the target equal to the source."""
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from cdc_assets.config import load_config
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.target_savepoints import list_savepoints
from cdc_assets_tests.support import (cli_command, fetch_rows, mysql_table_task, postgres_target, run_transactions,
                                      source_database, write_config)

EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
ROWS, SPLIT = 24_000, 2_000


class Command:
    """`cdc-assets ...` in a process group of its own, its output in files the test can read while it runs."""

    def __init__(self, tmp_path, path, *args: str) -> None:
        self.name = "_".join(a for a in args if not a.startswith("-"))
        self.out, self.err = (tmp_path / f"{self.name}.{i}.{time.monotonic_ns()}" for i in ("out", "err"))
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(cli_command(path, *args), stdout=out, stderr=err, start_new_session=True)

    def output(self) -> tuple[str, str]:
        return self.out.read_text(), self.err.read_text()

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output()[1]:
            assert self.proc.poll() is None, f"{self.name} ended before saying {text!r}: {self.output()}"
            assert time.monotonic() < deadline, f"{self.name} never said {text!r}: {self.output()}"
            time.sleep(0.2)

    def stop(self, sig: int, password: str, within: float = 30) -> tuple[str, str]:
        """Send `sig`; the command must end within `within` seconds, as this file's docstring says."""
        os.killpg(self.proc.pid, sig) if sig == signal.SIGINT else self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=within)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            pytest.fail(f"{self.name} still ran {within} s after {sig.name}: {self.output()}")
        out, err = self.output()
        assert self.proc.returncode == EXIT[sig], f"{self.name}: exit {self.proc.returncode}\n{out}\n{err}"
        assert "Traceback" not in out + err and "Error" not in err, err
        assert password not in out + err
        said = [line for line in err.splitlines() if line.startswith(f"{sig.name}: ")]
        assert len(said) == 1, err
        assert len(out.splitlines()) + len(err.splitlines()) <= 12, f"{out}\n{err}"
        return out, err

    def ok(self, timeout: float = 600) -> str:
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
        out, err = self.output()
        assert self.proc.returncode == 0, f"{self.name}: exit {self.proc.returncode}\n{out}\n{err[-3000:]}"
        return out


def target_count(tgt, table: str) -> int:
    with tgt.cursor() as cur:
        try:
            cur.execute(f"SELECT count(*) FROM {table}")
        except Exception:  # not created yet
            tgt.rollback()
            return 0
        count = cur.fetchone()[0]
    tgt.rollback()
    return count


@pytest.mark.spark
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_snapshot_stops_between_splits_and_a_second_one_finishes_it(tmp_path, servers, unique_name, sig):
    target = f"{unique_name}_tgt"
    tgt = postgres_target(servers, target)
    with source_database(servers, "mysql", unique_name, [
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            f"INSERT INTO t SELECT seq, seq * 7 FROM seq_1_to_{ROWS}"]) as src:
        path = write_config(tmp_path, servers, task_id="stop_snap", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target="postgres", target_db=target,
                            snapshot={"split_size": SPLIT, "partitions_per_run": 2,
                                      "read_limit": {"rows_per_second": 4_000}})
        password = load_config(path).source.db_url.password
        table = f'"{unique_name}".t'
        snapshot = Command(tmp_path, path, "snapshot")
        deadline = time.monotonic() + 300
        while target_count(tgt, table) == 0:  # the first group committed: the next one is being read
            assert snapshot.proc.poll() is None and time.monotonic() < deadline, snapshot.output()
            time.sleep(0.1)
        snapshot.stop(sig, password)

        committed = target_count(tgt, table)
        assert 0 < committed <= ROWS - 2 * SPLIT, "the snapshot went on with the groups after the signal"
        rt = TaskRuntime(load_config(path))
        try:
            [plan] = [tp.plan for tp in ensure_plans(rt)]
        finally:
            rt.close()
        for split in plan.splits:  # each split is in the target whole, or not at all
            lo, hi = (None if v is None else (v[0] if isinstance(v, tuple) else v)
                      for v in (split.range.start, split.range.end))
            where = " AND ".join([f"id >= {lo}"] * (lo is not None) + [f"id < {hi}"] * (hi is not None)) or "true"
            with tgt.cursor() as cur:
                cur.execute(f"SELECT count(*) FROM {table} WHERE {where}")
                have = cur.fetchone()[0]
            tgt.rollback()
            with src.cursor() as cur:
                cur.execute(f"SELECT count(*) FROM t WHERE {where}")
                want = cur.fetchone()[0]
            assert have in (0, want), f"split {split.id} is in the target by halves: {have} of {want} rows"

        assert f"{len(plan.splits)}/{len(plan.splits)} splits finished" in Command(tmp_path, path, "snapshot").ok()
        tgt.autocommit = True
        assert fetch_rows(tgt, table, "id") == fetch_rows(src, "t", "id")
    tgt.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_sync_stops_mid_catch_up_at_a_batch_end(tmp_path, servers, unique_name, sig):
    pipeline = {"checkpoint_after_events": 200, "read_limit": {"rows_per_second": 2_000}}
    with mysql_table_task(servers, unique_name, tmp_path, "stop_sync", pipeline) as (path, rt, src, tgt):
        tgt.autocommit = True
        sync(rt, until_caught_up=True)  # the task starts at the log's end
        run_transactions(src, [f"INSERT INTO t SELECT seq, 0 FROM seq_{i * 100 + 1}_to_{i * 100 + 100}"
                               for i in range(100)])
        run_transactions(src, [f"UPDATE t SET v = v + 1 WHERE id % 7 = {i % 7}" for i in range(7)])
        catch_up = Command(tmp_path, path, "sync", "--until-caught-up")
        deadline = time.monotonic() + 120
        while target_count(tgt, f'"{unique_name}".t') < 1000:
            assert catch_up.proc.poll() is None and time.monotonic() < deadline, catch_up.output()
            time.sleep(0.1)
        catch_up.stop(sig, rt.config.source.db_url.password)
        assert fetch_rows(tgt, f'"{unique_name}".t', "id") != fetch_rows(src, "t", "id"), "it caught up anyway"

        Command(tmp_path, path, "sync", "--until-caught-up").ok()
        assert fetch_rows(tgt, f'"{unique_name}".t', "id") == fetch_rows(src, "t", "id")


def test_commands_waiting_for_the_lease_of_a_running_sync_stop_at_once(tmp_path, servers, unique_name):
    with mysql_table_task(servers, unique_name, tmp_path, "stop_wait", {}) as (path, rt, src, tgt):
        tgt.autocommit = True
        sync(rt, until_caught_up=True)
        password = rt.config.source.db_url.password
        follower = Command(tmp_path, path, "sync")
        try:
            lock = rt.config.data_dir / "stop_wait.checkpoint.lock"
            deadline = time.monotonic() + 120
            while "sync (pid" not in (lock.read_text() if lock.exists() else ""):
                assert follower.proc.poll() is None and time.monotonic() < deadline, follower.output()
                time.sleep(0.2)
            run_transactions(src, ["INSERT INTO t VALUES (1, 1), (2, 2)"])
            waiting = {"sync": Command(tmp_path, path, "sync"),
                       "savepoint create": Command(tmp_path, path, "savepoint", "create", "sp1"),
                       "sync --savepoint-on-stop": Command(tmp_path, path, "sync", "--savepoint-on-stop", "sp2")}
            for name, command in waiting.items():
                command.wait_for("holds its checkpoint")
                started = time.monotonic()
                out, err = command.stop(signal.SIGINT, password, within=10)
                assert f"SIGINT: cdc-assets {name.split()[0]} stopped" in err, err
                assert time.monotonic() - started < 10
                # A savepoint asked for and not taken is said so, never left for the operator to find out.
                assert ("savepoint sp2 was not taken" in err) == name.endswith("on-stop"), err
            run_transactions(src, ["UPDATE t SET v = 3 WHERE id = 1"])
            follower.stop(signal.SIGTERM, password)
        finally:
            if follower.proc.poll() is None:
                os.killpg(follower.proc.pid, signal.SIGKILL)
        assert [sp.name for sp in list_savepoints(rt)] == []
        Command(tmp_path, path, "sync", "--until-caught-up").ok()
        assert fetch_rows(tgt, f'"{unique_name}".t', "id") == fetch_rows(src, "t", "id") == [(1, 3), (2, 2)]


@pytest.fixture
def silent_source():
    """A MySQL port that accepts connections and never answers: a command reading the source waits there."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held = []
    threading.Thread(target=lambda: [held.append(listener.accept()) for _ in range(16)], daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for conn, _ in held:
        conn.close()


@pytest.mark.parametrize("command, sig", [
    (("plan",), signal.SIGINT), (("plan",), signal.SIGTERM),
    (("reset", "--to", "latest"), signal.SIGINT), (("verify",), signal.SIGTERM),
], ids=["plan-SIGINT", "plan-SIGTERM", "reset-SIGINT", "verify-SIGTERM"])
def test_a_command_waiting_on_a_silent_source_stops_at_once(tmp_path, servers, unique_name, silent_source, command,
                                                            sig):
    with mysql_table_task(servers, unique_name, tmp_path, "stop_wait", {}) as (path, rt, src, tgt):
        if command[0] != "plan":  # a checkpoint to reset, splits to verify
            sync(rt, until_caught_up=True)
            ensure_plans(rt)
        before = rt.resumer.records()
        config = rt.config
        path.write_text(path.read_text().replace(f":{config.source.db_url.port}", f":{silent_source}"))
        running = Command(tmp_path, path, *command)
        time.sleep(8)  # started, and waiting for the source's answer
        assert running.proc.poll() is None, running.output()
        out, err = running.stop(sig, config.source.db_url.password, within=10)
        assert f"{sig.name}: cdc-assets {command[0]} stopped" in err, err
        assert rt.resumer.records() == before  # the checkpoint where it was
        plans = config.data_dir / "plans" / "stop_wait"
        assert command[0] != "plan" or not plans.exists() or not list(plans.iterdir())  # no plan, not half a one
