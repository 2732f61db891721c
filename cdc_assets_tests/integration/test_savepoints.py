"""Savepoints on real servers, MySQL -> PostgreSQL and PostgreSQL -> PostgreSQL, positions in the target and in
SQLite: snapshot, sync, savepoint, writer changes + sync, rollback: the target equals the source as it was when
the savepoint was taken (captured from the source then, with no writer running); sync: the target equals the
source now. Rollbacks are refused, naming why, when the log no longer reaches the savepoint or the plan changed."""
import os
import signal
import subprocess
import time

import pytest

from cdc_assets.engine import savepoints, target_savepoints
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.savepoint_values import SavepointError
from cdc_assets.errors import CdcError
from cdc_assets.sinks.before_images import BeforeImages
from cdc_assets_tests.support import cli_command, config_for, fetch_rows, run_transactions, snapshot_all, source_database

ROWS = 500

MYSQL_SEED = [
    "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40), v INT NOT NULL)",
    f"INSERT INTO items SELECT seq, CONCAT('item ', seq), 0 FROM seq_1_to_{ROWS}",
    "CREATE TABLE pairs (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b))",
    "INSERT INTO pairs VALUES (1, 'x', 1), (1, 'y', 2), (2, 'x', 3)",
]
POSTGRES_SEED = [
    "CREATE SCHEMA {ns}",
    "CREATE TABLE {ns}.items (id INT PRIMARY KEY, name VARCHAR(40), v INT NOT NULL)",
    f"INSERT INTO {{ns}}.items SELECT g, 'item ' || g, 0 FROM generate_series(1, {ROWS}) g",
    "CREATE TABLE {ns}.pairs (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b))",
    "INSERT INTO {ns}.pairs VALUES (1, 'x', 1), (1, 'y', 2), (2, 'x', 3)",
]


@pytest.fixture
def source(request, servers, unique_name):
    kind = request.param
    seed = MYSQL_SEED if kind == "mysql" else [s.format(ns=unique_name) for s in POSTGRES_SEED]
    with source_database(servers, kind, unique_name, seed) as conn:
        yield kind, unique_name, conn


def task(tmp_path, servers, spark, source, pg_target, resumer) -> TaskRuntime:
    kind, ns, _ = source
    config = config_for(tmp_path, servers, task_id=f"sp_{ns}", source=kind, source_db=ns,
                        tables=[f"{ns}.items", f"{ns}.pairs"], target="postgres", target_db=pg_target[0],
                        snapshot={"split_size": 200}, resumer=resumer)
    rt = TaskRuntime(config)
    rt.adopt_spark(spark)
    snapshot_all(rt)
    sync(rt, until_caught_up=True)
    return rt


def run(conn, transactions: list[str]) -> None:
    run_transactions(conn, transactions)


def rows(conn, kind: str, ns: str) -> dict[str, list[tuple]]:
    quote = (lambda n: f"`{ns}`.`{n}`") if kind == "mysql" else (lambda n: f'"{ns}"."{n}"')
    return {"items": fetch_rows(conn, quote("items"), "id"), "pairs": fetch_rows(conn, quote("pairs"), "a, b")}


def changes(ns: str, base: int) -> list[str]:
    """Updates, inserts, deletes, a key change, an insert deleted again, and a row deleted then inserted back."""
    return [
        f"UPDATE {ns}.items SET v = v + {base} WHERE id <= 60; INSERT INTO {ns}.items VALUES ({base}, 'new', 1)",
        f"DELETE FROM {ns}.items WHERE id BETWEEN 100 AND 130; UPDATE {ns}.items SET name = 'renamed' WHERE id = {base}",
        f"UPDATE {ns}.items SET id = {base + 1} WHERE id = {300 + base % 97}",
        f"UPDATE {ns}.pairs SET b = 'z{base % 7}' WHERE a = 1 AND b = 'y'; DELETE FROM {ns}.pairs WHERE a = 2",
        f"INSERT INTO {ns}.items VALUES ({base + 2}, 'gone soon', 1); DELETE FROM {ns}.items WHERE id = {base + 2}",
        f"DELETE FROM {ns}.items WHERE id = 7; INSERT INTO {ns}.items VALUES (7, 'back', {base})",
        f"INSERT INTO {ns}.pairs VALUES ({base}, 'q', 1)",
    ]


DIRECTIONS = [pytest.param(("mysql", {"resume_type": "sqlite"}), id="mysql-sqlite"),
              pytest.param(("mysql", {"resume_type": "from_target"}), id="mysql-from_target"),
              pytest.param(("postgres", {"resume_type": "sqlite"}), id="postgres-sqlite"),
              pytest.param(("postgres", {"resume_type": "from_target"}), id="postgres-from_target")]


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_rollback_restores_the_source_as_of_the_savepoint_then_sync_converges(request, tmp_path, servers, spark,
                                                                               unique_name, pg_target, direction):
    kind, resumer = direction
    seed = MYSQL_SEED if kind == "mysql" else [s.format(ns=unique_name) for s in POSTGRES_SEED]
    with source_database(servers, kind, unique_name, seed) as conn:
        src = (kind, unique_name, conn)
        rt = task(tmp_path, servers, spark, src, pg_target, resumer)
        ns, target = unique_name, pg_target[1]
        try:
            run(conn, changes(ns, 1000))
            sync(rt, until_caught_up=True)
            first = savepoints.create_on(rt, "first")[0].savepoint
            at_first = rows(conn, kind, ns)  # the source as of the savepoint: no writer runs meanwhile
            assert rows(target, "postgres", ns) == at_first
            assert target_savepoints.storage(rt) == {f"{ns}.items": 0, f"{ns}.pairs": 0}  # nothing copied

            run(conn, changes(ns, 2000))
            sync(rt, until_caught_up=True)
            second = savepoints.create_on(rt, "second")[0].savepoint
            at_second = rows(conn, kind, ns)
            assert second.epoch == first.epoch + 1
            run(conn, changes(ns, 3000))
            sync(rt, until_caught_up=True)
            assert rows(target, "postgres", ns) == rows(conn, kind, ns) != at_second
            held = target_savepoints.storage(rt)
            assert 0 < held[f"{ns}.items"] < 2 * ROWS  # images of the keys changed, not of the table

            [report] = savepoints.rollback_on(rt, "second")
            assert rows(target, "postgres", ns) == at_second
            assert rt.resumer.checkpoint().position == second.position
            assert report.restored[f"{ns}.items"] > 0
            sync(rt, until_caught_up=True)
            assert rows(target, "postgres", ns) == rows(conn, kind, ns)

            run(conn, changes(ns, 4000))
            sync(rt, until_caught_up=True)
            [report] = savepoints.rollback_on(rt, "first")
            assert report.dropped == ["second"]
            assert rows(target, "postgres", ns) == at_first
            assert [s.name for s in target_savepoints.list_savepoints(rt)] == ["first"]
            sync(rt, until_caught_up=True)
            assert rows(target, "postgres", ns) == rows(conn, kind, ns)

            savepoints.delete_on(rt, "first")
            assert target_savepoints.list_savepoints(rt) == [] and target_savepoints.storage(rt) == {}
            run(conn, changes(ns, 5000))
            sync(rt, until_caught_up=True)  # no savepoint: no images, and no table to write them to
            assert rows(target, "postgres", ns) == rows(conn, kind, ns)
            assert BeforeImages(rt.sink).shadow_columns(rt.config.task_id, rt.config.source.table_ids[0]) == []
        finally:
            rt.close()


@pytest.mark.parametrize("source", ["mysql", "postgres"], indirect=True)
def test_deleting_a_middle_savepoint_keeps_what_the_older_one_needs(tmp_path, servers, spark, source, pg_target):
    kind, ns, conn = source
    rt = task(tmp_path, servers, spark, source, pg_target, {"resume_type": "sqlite"})
    try:
        savepoints.create_on(rt, "a")
        at_a = rows(conn, kind, ns)
        run(conn, changes(ns, 1000))
        sync(rt, until_caught_up=True)
        savepoints.create_on(rt, "b")
        run(conn, changes(ns, 2000))
        sync(rt, until_caught_up=True)
        savepoints.delete_on(rt, "b")
        savepoints.create_on(rt, "c")
        run(conn, changes(ns, 3000))
        sync(rt, until_caught_up=True)
        savepoints.rollback_on(rt, "a")
        assert rows(pg_target[1], "postgres", ns) == at_a
        sync(rt, until_caught_up=True)
        assert rows(pg_target[1], "postgres", ns) == rows(conn, kind, ns)
    finally:
        rt.close()


@pytest.mark.parametrize("source", ["mysql"], indirect=True)
def test_rollback_is_refused_once_the_binlog_no_longer_reaches_the_savepoint(tmp_path, servers, spark, source,
                                                                             pg_target):
    kind, ns, conn = source
    rt = task(tmp_path, servers, spark, source, pg_target, {"resume_type": "sqlite"})
    try:
        savepoints.create_on(rt, "old")
        run(conn, changes(ns, 1000))
        sync(rt, until_caught_up=True)
        with conn.cursor() as cur:
            cur.execute("FLUSH BINARY LOGS")
            cur.execute("SHOW MASTER STATUS")
            newest = cur.fetchone()[0]
            for _ in range(600):  # PURGE skips a file a dump thread that has not ended yet still uses
                cur.execute(f"PURGE BINARY LOGS TO '{newest}'")
                cur.execute("SHOW BINARY LOGS")
                if [row[0] for row in cur.fetchall()] == [newest]:
                    break
                time.sleep(0.05)
        before = rows(pg_target[1], "postgres", ns)
        with pytest.raises(CdcError) as caught:
            savepoints.rollback_on(rt, "old")
        assert "no longer reaches" in str(caught.value) and "savepoint delete old" in str(caught.value)
        assert rows(pg_target[1], "postgres", ns) == before  # nothing touched
    finally:
        rt.close()


@pytest.mark.parametrize("source", ["postgres"], indirect=True)
def test_rollback_is_refused_after_a_replan_and_when_the_savepoint_slot_is_gone(tmp_path, servers, spark, source,
                                                                               pg_target):
    kind, ns, conn = source
    rt = task(tmp_path, servers, spark, source, pg_target, {"resume_type": "sqlite"})
    try:
        held = savepoints.create_on(rt, "held")[0].savepoint
        run(conn, changes(ns, 1000))
        sync(rt, until_caught_up=True)
        lost = savepoints.create_on(rt, "lost")[0].savepoint
        admin = servers.postgres.connect()
        admin.autocommit = True
        try:
            with admin.cursor() as cur:
                cur.execute("SELECT slot_name FROM pg_replication_slots WHERE slot_name IN (%s, %s)",
                            (held.log_tag["slot"], lost.log_tag["slot"]))
                assert len(cur.fetchall()) == 2  # each savepoint holds the WAL through a slot of its own
                cur.execute("SELECT pg_drop_replication_slot(%s)", (lost.log_tag["slot"],))
        finally:
            admin.close()
        with pytest.raises(CdcError) as caught:
            savepoints.rollback_on(rt, "lost")
        assert f"replication slot {lost.log_tag['slot']} is gone" in str(caught.value)
        table = rt.config.source.table_ids[1]
        rt.plans.delete(table)
        ensure_plans(rt)  # pairs gets a new plan id
        with pytest.raises(SavepointError) as caught:
            savepoints.rollback_on(rt, "held")
        assert f"the plan of {table} changed" in str(caught.value)
    finally:
        rt.close()


@pytest.mark.parametrize("source", ["mysql"], indirect=True)
def test_sync_savepoint_on_stop_takes_it_at_the_batch_end_where_sigterm_stopped(tmp_path, servers, spark, source,
                                                                                 pg_target):
    kind, ns, conn = source
    rt = task(tmp_path, servers, spark, source, pg_target, {"resume_type": "sqlite"})
    path = tmp_path / f"sp_{ns}.yaml"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.Popen(cli_command(path, "sync", "--savepoint-on-stop", "on_stop"), env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        run(conn, changes(ns, 1000))
        want = rows(conn, kind, ns)
        deadline = time.monotonic() + 60
        while rows(pg_target[1], "postgres", ns) != want and time.monotonic() < deadline:
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 143, out  # the shell's code for SIGTERM, at the batch end
        assert "created savepoint on_stop" in out
        [sp] = target_savepoints.list_savepoints(rt)
        assert sp.name == "on_stop" and sp.position == rt.resumer.checkpoint().position
        run(conn, changes(ns, 2000))
        sync(rt, until_caught_up=True)
        savepoints.rollback_on(rt, "on_stop")
        assert rows(pg_target[1], "postgres", ns) == want
    finally:
        rt.close()


@pytest.mark.parametrize("source", ["mysql"], indirect=True)
def test_rollback_into_a_mariadb_target(tmp_path, servers, spark, source, mariadb_target):
    kind, ns, conn = source
    config = config_for(tmp_path, servers, task_id=f"spm_{ns}", source=kind, source_db=ns,
                        tables=[f"{ns}.items", f"{ns}.pairs"], target="mysql", target_db="",
                        target_server=mariadb_target, snapshot={"split_size": 200},
                        resumer={"resume_type": "from_target"})
    rt = TaskRuntime(config)
    rt.adopt_spark(spark)
    target = mariadb_target.connect()
    try:
        snapshot_all(rt)
        sync(rt, until_caught_up=True)
        savepoints.create_on(rt, "a")
        at_a = rows(conn, kind, ns)
        run(conn, changes(ns, 1000))
        sync(rt, until_caught_up=True)
        savepoints.create_on(rt, "b")
        at_b = rows(conn, kind, ns)
        run(conn, changes(ns, 2000))
        sync(rt, until_caught_up=True)
        savepoints.delete_on(rt, "b")  # its images fold into a's
        savepoints.create_on(rt, "c")
        run(conn, changes(ns, 3000))
        sync(rt, until_caught_up=True)
        assert rows(target, "mysql", ns) == rows(conn, kind, ns) != at_b
        savepoints.rollback_on(rt, "a")
        assert rows(target, "mysql", ns) == at_a
        sync(rt, until_caught_up=True)
        assert rows(target, "mysql", ns) == rows(conn, kind, ns)
    finally:
        rt.close()
        with target.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{ns}`")
        target.close()
