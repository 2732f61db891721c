"""Savepoints of tasks with several targets, on the real servers.

- Three targets (two PostgreSQL databases, one MariaDB database, their positions in one SQLite file): a savepoint
  of every target, then `cdc-assets savepoint rollback` SIGKILLed after the second target's commit, before its
  checkpoint reached SQLite: the first two targets are at the savepoint, the third as before; the same rollback
  again finishes it, every target equals the saved state row by row, and a sync makes each equal the source.
- A PostgreSQL source into two PostgreSQL databases: the same savepoint name on both targets is two slots beside
  the task's one slot; a create run again keeps the targets that have it and tags the others, and is refused
  when the name tags an earlier state; a rollback of every target is refused, touching none, while one target lacks the
  savepoint; `--target` rolls back one target and leaves the other as it was; a sync then converges both.
"""
import os
import signal
import subprocess

import pytest
import yaml

from cdc_assets.config import load_config
from cdc_assets.engine import savepoints
from cdc_assets.engine.faults import ENV as CRASH_ENV
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.savepoint_values import SavepointError
from cdc_assets.sources.postgres.slot import slot_name
from cdc_assets_tests.support import (cli_command, fetch_rows, run_transactions, snapshot_all, three_target_source,
                                     three_targets)

pytestmark = pytest.mark.crash
KEPT = "kept (there already at this state)"
CHANGES = ["UPDATE t SET v = v + 100 WHERE id <= 10", "DELETE FROM t WHERE id BETWEEN 20 AND 24",
           "INSERT INTO t VALUES (101, 1), (102, 2)", "UPDATE t SET id = 103 WHERE id = 15"]


def cli(path, *args: str, crash: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    env.update({CRASH_ENV: crash} if crash else {})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    return subprocess.run(cli_command(path, *args), env=env, capture_output=True, text=True, timeout=300)


def test_a_rollback_of_three_targets_killed_between_two_is_finished_by_running_it_again(
        tmp_path, servers, mariadb_target, unique_name, spark):
    db = unique_name
    src = three_target_source(servers, db)
    path = three_targets(tmp_path, servers, mariadb_target, db, f"spt_{db}")
    targets = {"pg_a": servers.postgres.connect(f"{db}_a"), "pg_b": servers.postgres.connect(f"{db}_b"),
               "maria": mariadb_target.connect()}

    def now() -> dict[str, list[tuple]]:
        return {name: fetch_rows(conn, f"`{db}`.t" if name == "maria" else f'"{db}".t', "id")
                for name, conn in targets.items()}

    rt = TaskRuntime(load_config(path))
    rt.adopt_spark(spark)
    try:
        snapshot_all(rt)
        run_transactions(src, ["UPDATE t SET v = v + 1 WHERE id = 1"])
        sync(rt, until_caught_up=True)
        created = savepoints.create_on(rt, "before_release")
        assert [(r.target, r.action) for r in created] == [("pg_a", "created"), ("pg_b", "created"),
                                                            ("maria", "created")]
        saved = fetch_rows(src, "t", "id")
        run_transactions(src, CHANGES)
        sync(rt, until_caught_up=True)
        positions = {lane.name: lane.resumer.checkpoint().position for lane in rt.lanes}
    finally:
        rt.close()
    before = fetch_rows(src, "t", "id")
    assert before != saved and now() == {name: before for name in targets}

    killed = cli(path, "savepoint", "rollback", "before_release", crash="savepoint.rollback_committed:2")
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert now() == {"pg_a": saved, "pg_b": saved, "maria": before}, "pg_b committed; maria was not reached"

    again = cli(path, "savepoint", "rollback", "before_release")
    assert again.returncode == 0, again.stdout + again.stderr
    assert [line.split(":")[0] for line in again.stdout.splitlines() if "rolled back to savepoint" in line] == [
        "target pg_a", "target pg_b", "target maria"], again.stdout
    assert now() == {name: saved for name in targets}
    rt = TaskRuntime(load_config(path))
    try:
        at = {lane.name: lane.resumer.checkpoint().position for lane in rt.lanes}
        assert at == {r.target: r.savepoint.position for r in created} and at != positions
    finally:
        rt.close()

    done = cli(path, "sync", "--until-caught-up")
    assert done.returncode == 0, done.stdout + done.stderr
    assert now() == {name: fetch_rows(src, "t", "id") for name in targets}
    with targets["maria"].cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
    for conn in targets.values():
        conn.close()
    with src.cursor() as cur:
        cur.execute(f"DROP DATABASE `{db}`")
    src.close()


def two_postgres_targets(tmp_path, servers, ns: str) -> tuple:
    """A PostgreSQL schema `<ns>` with table t, captured into databases `<ns>_a` (target a) and `<ns>_b` (b)."""
    servers.postgres.create_database(ns)
    src = servers.postgres.connect(ns)
    src.autocommit = True
    with src.cursor() as cur:
        cur.execute(f"CREATE SCHEMA {ns}")
        cur.execute(f"CREATE TABLE {ns}.t (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO {ns}.t SELECT g, g FROM generate_series(1, 30) g")
        cur.execute(f"SET search_path TO {ns}")
    for name in ("a", "b"):
        servers.postgres.create_database(f"{ns}_{name}")
    path = tmp_path / f"sp2_{ns}.yaml"
    path.write_text(yaml.safe_dump({
        "task_id": f"sp2_{ns}",
        "source": {"db_type": "postgres", "url": servers.postgres.url(ns), "tables": [f"{ns}.t"]},
        "targets": [{"name": n, "db_type": "postgres", "url": servers.postgres.url(f"{ns}_{n}")} for n in "ab"],
        "runtime": {"data_dir": str(tmp_path / "state")},
        "spark": {"master": "local[2]"},
    }))
    return path, src


def test_one_target_rolls_back_alone_and_the_same_savepoint_on_two_targets_holds_two_slots(
        tmp_path, servers, unique_name, spark):
    ns = unique_name
    path, src = two_postgres_targets(tmp_path, servers, ns)
    targets = {n: servers.postgres.connect(f"{ns}_{n}") for n in "ab"}

    def now() -> dict[str, list[tuple]]:
        return {n: fetch_rows(conn, f'"{ns}".t', "id") for n, conn in targets.items()}

    rt = TaskRuntime(load_config(path))
    rt.adopt_spark(spark)
    try:
        snapshot_all(rt)
        sync(rt, until_caught_up=True)
        created = savepoints.create_on(rt, "s")
        [only_a] = savepoints.create_on(rt, "only_a", ["a"])
        assert only_a.target == "a"
        # A create that reached some targets (as if killed after them) finishes when run again.
        assert [(r.target, r.action) for r in savepoints.create_on(rt, "s")] == [("a", KEPT), ("b", KEPT)]
        savepoints.create_on(rt, "part", ["a"])
        assert [(r.target, r.action) for r in savepoints.create_on(rt, "part")] == [("a", KEPT), ("b", "created")]
        savepoints.delete_on(rt, "part")
        slots = {r.target: r.savepoint.log_tag["slot"] for r in created}
        with src.cursor() as cur:
            cur.execute("SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE %s",
                        (slot_name(rt.config.task_id) + "%",))
            held = {row[0] for row in cur.fetchall()}
        assert len(set(slots.values())) == 2 and held == {slot_name(rt.config.task_id), *slots.values(),
                                                           only_a.savepoint.log_tag["slot"]}
        saved = fetch_rows(src, "t", "id")
        run_transactions(src, CHANGES)
        sync(rt, until_caught_up=True)
        later = fetch_rows(src, "t", "id")
        assert now() == {"a": later, "b": later} and later != saved
        a_checkpoint = rt.lanes[0].resumer.checkpoint()
        with pytest.raises(SavepointError) as taken:  # the name tags an earlier state: no target is tagged again
            savepoints.create_on(rt, "s")
        assert "already has a savepoint 's', of an earlier state" in str(taken.value)

        with pytest.raises(SavepointError) as refused:  # b has no savepoint only_a: neither target moves
            savepoints.rollback_on(rt, "only_a")
        assert "target b of task" in str(refused.value) and "--target a" in str(refused.value)
        assert now() == {"a": later, "b": later}
    finally:
        rt.close()

    one = cli(path, "savepoint", "rollback", "s", "--target", "b")
    assert one.returncode == 0 and one.stdout.count("rolled back to savepoint") == 1, one.stdout + one.stderr
    assert now() == {"a": later, "b": saved}
    rt = TaskRuntime(load_config(path))
    try:
        assert rt.lanes[0].resumer.checkpoint() == a_checkpoint  # a untouched
        sync(rt, until_caught_up=True)  # the task's slot went back to b's savepoint: a skips what it holds
        assert now() == {"a": later, "b": later}
        assert rt.lanes[0].resumer.checkpoint().events == a_checkpoint.events
        listed = cli(path, "savepoint", "list")
        assert listed.stdout.count("target a: s: epoch") == 1 and listed.stdout.count("target b: s: epoch") == 1
        deleted = savepoints.delete_on(rt, "only_a")
        assert [(r.target, r.action) for r in deleted] == [("a", "deleted"), ("b", "not on")]
    finally:
        rt.close()
        for conn in targets.values():
            conn.close()
        src.close()
