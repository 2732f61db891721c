"""One task, three targets (two PostgreSQL databases on two servers and one MariaDB database), each keeping its
own positions in itself (exactly-once). Under each commit policy the sync is SIGKILLed between the targets'
commits of one batch, or one optional target's server is killed and restarted while a writer runs; afterwards
every target equals the source row by row, and the audit triggers show that no target applied a row version
twice or went back to an older one."""
import os
import signal
import time

import pytest
import yaml

from cdc_assets.config import load_config
from cdc_assets.defs.incremental import _decide
from cdc_assets.dev.postgres import PostgresServer
from cdc_assets.dev.processes import free_port
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets_tests.crash.test_incremental_crash import (AUDIT, MYSQL_TABLES, ROWS, SPLIT, TABLES, Writer,
                                                           assert_audit_exactly_once, audit_mariadb, cli,
                                                           follow_briefly, killed_by_itself, ok,
                                                           stopped_by_sigterm)
from cdc_assets_tests.support import fetch_rows

pytestmark = pytest.mark.crash


@pytest.fixture
def pg_b(servers):
    """A PostgreSQL server of its own for the target that is killed and restarted."""
    server = PostgresServer(servers.base_dir / f"pg_b_{free_port()}", free_port()).start()
    try:
        yield server
    finally:
        server.stop()


def kill_server(server: PostgresServer) -> None:
    os.kill(server.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while server.answers() and time.monotonic() < deadline:  # backends notice their postmaster died
        time.sleep(0.2)


def restart_server(server: PostgresServer) -> None:
    for attempt in range(10):  # backends of the killed postmaster may hold its shared memory a moment longer
        try:
            server.start()
            return
        except RuntimeError:
            if attempt == 9:
                raise
            time.sleep(1)


class Task:
    def __init__(self, tmp_path, servers, mariadb_target, pg_b, unique_name, policy: str) -> None:
        self.db = unique_name
        servers.mariadb.create_database(unique_name)
        self.src = servers.mariadb.connect(unique_name)
        with self.src.cursor() as cur:
            for statement in MYSQL_TABLES:
                cur.execute(statement)
        self.pg_a_db = f"{unique_name}_a"
        servers.postgres.create_database(self.pg_a_db)
        pg_b.create_database("tgt_b")
        raw = {
            "task_id": f"multi_{unique_name}",
            "source": {"db_type": "mysql", "url": servers.mariadb.url(),
                       "tables": [f"{unique_name}.{t}" for t in TABLES]},
            "targets": [
                {"name": "pg_a", "db_type": "postgres", "url": servers.postgres.url(self.pg_a_db)},
                {"name": "maria", "db_type": "mysql", "url": mariadb_target.url()},
                {"name": "pg_b", "db_type": "postgres", "url": pg_b.url("tgt_b"), "required": False},
            ],
            "resumer": {"resume_type": "from_target"},
            "snapshot": {"split_size": SPLIT, "partitions_per_run": 2},
            "pipeline": {"exactly_once": True, "checkpoint_after_events": 40, "checkpoint_interval_secs": 0.5,
                         "commit_policy": policy, "retry_backoff_secs": 0.5},
            "runtime": {"data_dir": str(tmp_path / "state")},
            "spark": {"master": "local[2]"},
        }
        self.path = tmp_path / "multi.yaml"
        self.path.write_text(yaml.safe_dump(raw))
        self.env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
        self.servers, self.mariadb_target, self.pg_b = servers, mariadb_target, pg_b

    def audit(self, spark) -> list:
        """Plan (which creates the target tables) and put audit triggers on every target table."""
        rt = TaskRuntime(load_config(self.path))
        rt.adopt_spark(spark)
        plans = ensure_plans(rt)
        for conn in (self.servers.postgres.connect(self.pg_a_db), self.pg_b.connect("tgt_b")):
            with conn.cursor() as cur:
                cur.execute(AUDIT)
                for t in TABLES:
                    cur.execute(f'CREATE TRIGGER audit AFTER INSERT OR UPDATE ON "{self.db}".{t} '
                                "FOR EACH ROW EXECUTE FUNCTION public.audit_row()")
            conn.close()
        conn = self.mariadb_target.connect()
        audit_mariadb(conn, self.db)
        conn.close()
        self.rt = rt
        return plans

    def snapshot_in_process(self, plans) -> None:
        for tp in plans:
            snapshot_splits(self.rt, tp.plan.table, [s.id for s in tp.plan.splits])
        self.rt.close()

    def targets(self):
        """(name, connection, how its tables are named) of each target."""
        pg_a = self.servers.postgres.connect(self.pg_a_db)
        maria = self.mariadb_target.connect()
        pg_b = self.pg_b.connect("tgt_b")
        return [("pg_a", pg_a, lambda t: f'"{self.db}".{t}'), ("maria", maria, lambda t: f"`{self.db}`.{t}"),
                ("pg_b", pg_b, lambda t: f'"{self.db}".{t}')]

    def differing(self) -> list[str]:
        out = []
        for name, conn, table in self.targets():
            for t in TABLES:
                if fetch_rows(conn, table(t), "id") != fetch_rows(self.src, t, "id"):
                    out.append(f"{name}.{t}")
            conn.close()
        return out

    def check(self) -> None:
        assert self.differing() == [], "targets differ from the source"
        for name, conn, _ in self.targets():
            with conn.cursor() as cur:
                if name == "maria":
                    cur.execute(f"SELECT tbl, id, v, tx FROM `{self.db}`.audit ORDER BY seq")
                else:
                    cur.execute("SELECT tbl, id, v, tx FROM public.audit ORDER BY seq")
                rows = cur.fetchall()
            conn.close()
            assert len(rows) > 3 * ROWS, f"{name}: the audit saw only {len(rows)} rows"
            assert_audit_exactly_once(rows)

    def close(self) -> None:
        with self.src.cursor() as cur:
            cur.execute(f"DROP DATABASE `{self.db}`")
        self.src.close()
        conn = self.mariadb_target.connect()
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{self.db}`")
        conn.close()


@pytest.mark.parametrize("policy, snapshot_crash, sync_crash", [
    # Killed after the first target committed its second batch, before the others committed theirs.
    ("all", None, "incremental.after_commit:4"),
    # Killed with a batch applied in the second target, its transaction (with its checkpoint) not committed; and
    # in the snapshot between the targets' commits and the finished markers of the other resumers.
    ("quorum(2)", "snapshot.after_commit:1", "incremental.after_apply:5"),
])
def test_sigkill_between_the_targets_commits(tmp_path, servers, mariadb_target, pg_b, unique_name, spark, policy,
                                             snapshot_crash, sync_crash):
    task = Task(tmp_path, servers, mariadb_target, pg_b, unique_name, policy)
    try:
        plans = task.audit(spark)
        writer = Writer(servers.mariadb, unique_name)
        writer.start()
        try:
            if snapshot_crash:
                task.rt.close()
                killed_by_itself(cli(task.path, task.env, "snapshot", crash=snapshot_crash))
                ok(cli(task.path, task.env, "snapshot"))
            else:
                task.snapshot_in_process(plans)
            time.sleep(2)  # a backlog for the catch-up
            killed_by_itself(cli(task.path, task.env, "sync", crash=sync_crash))
            follow_briefly(task.path, task.env)
        finally:
            writer.finish()
        assert writer.transactions > 100
        out = ok(cli(task.path, task.env, "sync", "--until-caught-up"))
        assert "target pg_b:" in out and "target maria:" in out, out
        task.check()
        if snapshot_crash:
            _asset_metadata_names_targets(task)
    finally:
        task.close()


def _asset_metadata_names_targets(task: Task) -> None:
    """The CLI's snapshot ran through Dagster: each table's materializations carry every target's figures."""
    import dagster as dg

    from cdc_assets.core.tables import TableId
    from cdc_assets.defs.names import asset_key

    with dg.DagsterInstance.from_config(task.env["DAGSTER_HOME"]) as instance:
        key = asset_key(f"multi_{task.db}", TableId(task.db, TABLES[0]))
        events = instance.fetch_materializations(key, limit=100).records
        assert events, "no materialization recorded"
        rows = {name: 0 for name in ("pg_a", "maria", "pg_b")}
        for record in events:
            metadata = record.asset_materialization.metadata
            for name in rows:
                rows[name] += metadata[f"target_{name}_rows"].value
        assert rows["pg_a"] > 0 and rows["maria"] > 0 and rows["pg_b"] > 0, rows


def test_required_goes_on_while_an_optional_target_is_down(tmp_path, servers, mariadb_target, pg_b, unique_name,
                                                         spark):
    task = Task(tmp_path, servers, mariadb_target, pg_b, unique_name, "required")
    try:
        plans = task.audit(spark)
        task.snapshot_in_process(plans)
        writer = Writer(servers.mariadb, unique_name)
        writer.start()
        follower = cli(task.path, task.env, "sync")
        try:
            time.sleep(4)
            kill_server(pg_b)
            time.sleep(6)
            assert follower.poll() is None, follower.communicate()[0][-3000:]
        finally:
            writer.finish()
        assert writer.transactions > 100
        # The required targets catch up without pg_b; the launcher says why it launches nothing more.
        deadline, reason = time.monotonic() + 60, ""
        while time.monotonic() < deadline and "caught up" not in reason:
            time.sleep(1)
            rt = TaskRuntime(load_config(task.path))
            try:
                decision = _decide(rt)
            finally:
                rt.close()
            reason = getattr(decision, "skip_message", "") or ""
        assert "caught up" in reason and "target pg_b is down" in reason, reason

        restart_server(pg_b)  # the running sync notices it answers again and catches it up from its checkpoint
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and task.differing():
            time.sleep(1)
        assert task.differing() == [], "pg_b did not catch up in the running sync"
        stopped_by_sigterm(follower)
        ok(cli(task.path, task.env, "sync", "--until-caught-up"))
        task.check()
    finally:
        if follower.poll() is None:
            follower.kill()
        task.close()


def test_an_optional_target_behind_a_postgresql_slot_is_lost_never_silently_stale(tmp_path, servers, pg_b,
                                                                                  unique_name, spark):
    """A PostgreSQL slot cannot go back: an optional target that was down while the required one went on comes
    back behind the slot's confirmed position. It must be reported lost, with the way out, and never be fed from
    the slot as if nothing were missing; the way out (a new name: snapshotted again) ends with it equal."""
    src_db = f"{unique_name}_src"
    servers.postgres.create_database(src_db)
    src = servers.postgres.connect(src_db)
    with src.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)")
        cur.execute("INSERT INTO t SELECT g, 0 FROM generate_series(1, 500) g")
    servers.postgres.create_database(f"{unique_name}_a")
    pg_b.create_database("tgt_b")

    def config(b_name: str):
        raw = {
            "task_id": f"lost_{unique_name}",
            "source": {"db_type": "postgres", "url": servers.postgres.url(src_db), "tables": ["public.t"]},
            "targets": [{"name": "pg_a", "db_type": "postgres", "url": servers.postgres.url(f"{unique_name}_a")},
                        {"name": b_name, "db_type": "postgres", "url": pg_b.url("tgt_b"), "required": False}],
            "pipeline": {"commit_policy": "required", "checkpoint_interval_secs": 0.5, "max_retries": 0},
            "runtime": {"data_dir": str(tmp_path / "state")},
            "spark": {"master": "local[2]"},
        }
        path = tmp_path / "lost.yaml"
        path.write_text(yaml.safe_dump(raw))
        return path

    path = config("pg_b")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    rt = TaskRuntime(load_config(path))
    rt.adopt_spark(spark)
    for tp in ensure_plans(rt):
        snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
    rt.close()
    ok(cli(path, env, "sync", "--until-caught-up"))

    def rows(server, database):
        conn = server.connect(database)
        try:
            return fetch_rows(conn, "public.t", "id")
        finally:
            conn.close()

    try:
        kill_server(pg_b)
        with src.cursor() as cur:
            cur.execute("UPDATE t SET v = v + 1 WHERE id <= 100")
        out = ok(cli(path, env, "sync", "--until-caught-up"))
        assert "pg_b" in out and "down" in out, out
        assert rows(servers.postgres, f"{unique_name}_a") == fetch_rows(src, "t", "id")

        restart_server(pg_b)
        with src.cursor() as cur:
            cur.execute("UPDATE t SET v = v + 1 WHERE id > 400")
        out = ok(cli(path, env, "sync", "--until-caught-up"))
        assert "target pg_b" in out and "lost" in out and "under a new name" in out, out
        assert rows(servers.postgres, f"{unique_name}_a") == fetch_rows(src, "t", "id")
        stale = rows(pg_b, "tgt_b")
        assert stale != fetch_rows(src, "t", "id") and all(v == 0 for _, v in stale), "pg_b was fed past a gap"

        path = config("pg_b_again")  # the way out the message gives
        ok(cli(path, env, "snapshot"))
        ok(cli(path, env, "sync", "--until-caught-up"))
        assert rows(pg_b, "tgt_b") == fetch_rows(src, "t", "id")
        assert rows(servers.postgres, f"{unique_name}_a") == fetch_rows(src, "t", "id")
    finally:
        src.close()
