"""SIGKILL the incremental phase at chosen points while a writer keeps changing several tables in
multi-statement transactions; restart; once caught up the target equals the source row by row. In
exactly-once mode a trigger on the target records every applied row version with its transaction: no
version may be committed by two transactions, and no row may go back to an older version.

A PostgreSQL source (at-least-once) has a partitioned table among them, whose rows the writer changes in its
leaf partitions, and a table with a TOASTed column whose rows the writer also gives new keys without touching it."""
import os
import random
import secrets
import signal
import subprocess
import threading
import time

import pytest

from cdc_assets.config import load_config
from cdc_assets.engine.faults import ENV as CRASH_ENV
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets_tests.support import cli_command, fetch_rows, write_config

pytestmark = pytest.mark.crash
TABLES = ("t1", "t2", "t3")
ROWS, SPLIT = 2_000, 400
DOC = secrets.token_hex(3000)  # 6 kB, incompressible: PostgreSQL stores it out of line (TOAST)

MYSQL_TABLES = [f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20))" for t in TABLES] + [
    f"INSERT INTO {t} SELECT seq, 0, 'seed' FROM seq_1_to_{ROWS}" for t in TABLES]
POSTGRES_TABLES = [
    "CREATE TABLE t1 (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20))",
    "CREATE TABLE t2 (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20)) PARTITION BY RANGE (id)",
    f"CREATE TABLE t2_low PARTITION OF t2 FOR VALUES FROM (MINVALUE) TO ({ROWS // 2})",
    f"CREATE TABLE t2_high PARTITION OF t2 FOR VALUES FROM ({ROWS // 2}) TO ({ROWS + 1})",
    f"CREATE TABLE t2_new PARTITION OF t2 FOR VALUES FROM ({ROWS + 1}) TO (MAXVALUE)",  # the writer's inserts
    "CREATE TABLE t3 (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20), doc TEXT)",
    "ALTER TABLE t3 ALTER COLUMN doc SET STORAGE EXTERNAL",
    *[f"INSERT INTO {t} SELECT g, 0, 'seed' FROM generate_series(1, {ROWS}) g" for t in ("t1", "t2")],
    f"INSERT INTO t3 SELECT g, 0, 'seed', '{DOC}' FROM generate_series(1, {ROWS}) g",
]

AUDIT = """
CREATE TABLE IF NOT EXISTS public.audit (seq BIGSERIAL PRIMARY KEY, tbl TEXT, id INT, v INT, tx BIGINT);
CREATE OR REPLACE FUNCTION public.audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.audit (tbl, id, v, tx) VALUES (TG_TABLE_NAME, NEW.id, NEW.v, txid_current()); RETURN NEW; END $$;
"""


class Writer(threading.Thread):
    """Transactions of 1-6 statements over all tables: version bumps, inserts of fresh ids, deletes; on a
    PostgreSQL source also key changes of t3's rows, whose TOASTed column stays as it is."""

    def __init__(self, server, database: str, key_changes: bool = False) -> None:
        super().__init__(daemon=True)
        self.conn = server.connect(database)
        self.key_changes = key_changes
        self.moved: set[int] = set()  # ids that rows got from a key change
        self.stop = threading.Event()
        self.next_id = ROWS + 1
        self.transactions = 0
        self.rng = random.Random(7)

    def run(self) -> None:
        with self.conn.cursor() as cur:
            while not self.stop.is_set():
                cur.execute("BEGIN")
                for _ in range(self.rng.randint(1, 6)):
                    table, roll = self.rng.choice(TABLES), self.rng.random()
                    if roll < 0.6:
                        lo = self.rng.randint(1, self.next_id)
                        cur.execute(f"UPDATE {table} SET v = v + 1 WHERE id BETWEEN %s AND %s", (lo, lo + 3))
                    elif roll < 0.7 and self.key_changes and table == "t3":
                        cur.execute("UPDATE t3 SET id = %s, v = v + 1 WHERE id = %s",
                                    (self.next_id, self.rng.randint(1, self.next_id)))
                        self.moved.add(self.next_id)
                        self.next_id += 1
                    elif roll < 0.85:
                        values = "(%s, 0, 'new', %s)" if self.key_changes and table == "t3" else "(%s, 0, 'new')"
                        cur.execute(f"INSERT INTO {table} VALUES {values}", (self.next_id, DOC)[:values.count("%s")])
                        self.next_id += 1
                    else:
                        cur.execute(f"DELETE FROM {table} WHERE id = %s", (self.rng.randint(1, self.next_id),))
                cur.execute("COMMIT")
                self.transactions += 1
                time.sleep(0.002)

    def finish(self) -> None:
        self.stop.set()
        self.join(30)
        self.conn.close()


def differences(got: list[tuple], want: list[tuple], moved: set[int]) -> str:
    """How the rows (by id) differ between target and source, with the first ones, long values cut short."""
    target, source = {r[0]: r for r in got}, {r[0]: r for r in want}
    ids = sorted(i for i in target.keys() | source.keys() if target.get(i) != source.get(i))
    missing = [i for i in ids if i not in target]
    short = lambda row: row and tuple(v[:12] + "..." if isinstance(v, str) and len(v) > 15 else v for v in row)  # noqa: E731
    return (f"{len(ids)} rows differ, {len(missing)} of them missing from the target, {len(set(ids) & moved)} of "
            "them given their id by a key change; " +
            "; ".join(f"id {i}: target {short(target.get(i))}, source {short(source.get(i))}" for i in ids[:5]))


def cli(path, env, *args, crash: str | None = None, **popen):
    env = {**env, **({CRASH_ENV: crash} if crash else {})}
    return subprocess.Popen(cli_command(path, *args), env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **popen)


def killed_by_itself(proc, timeout=300) -> None:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == -signal.SIGKILL, f"expected the crash point to kill the process:\n{out[-3000:]}"


def ok(proc, timeout=600, code=0) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == code, out[-3000:]
    return out


def stopped_by_sigterm(proc, timeout=120) -> str:
    """A `sync` stopped by SIGTERM ends at a batch end with the shell's code for it, 143."""
    proc.send_signal(signal.SIGTERM)
    return ok(proc, timeout=timeout, code=143)


def follow_briefly(path, env) -> None:
    """A `sync` following the source for a few seconds, then stopped with SIGTERM: it must exit cleanly."""
    follower = cli(path, env, "sync")
    time.sleep(4)
    stopped_by_sigterm(follower)


def crash_and_resume(rt, plans, path, env, writer: "Writer", phase: str, exactly_once: bool) -> None:
    """While `writer` changes the source: snapshot (killed in its backfill for that phase), kill the sync at the
    phase's point, restart a follower and stop it with SIGTERM, then catch up once the writer stopped."""
    writer.start()
    try:
        if phase == "backfill":
            killed_by_itself(cli(path, env, "snapshot", crash="snapshot.backfill:2"))
        for tp in plans:  # after the kill: the rest, in process (the same engine, without a second JVM start)
            snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
        rt.close()
        time.sleep(2)  # a backlog for the catch-up
        if phase == "catch_up":
            killed_by_itself(cli(path, env, "sync", crash="incremental.after_commit:3"))
        elif phase == "apply_before_checkpoint":
            point = "incremental.after_apply:2" if exactly_once else "incremental.after_commit:2"
            killed_by_itself(cli(path, env, "sync", crash=point))
        elif phase == "steady_state":
            proc = cli(path, env, "sync")
            time.sleep(8)  # caught up, then following the writer
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        follow_briefly(path, env)  # restarted while the writer still runs
    finally:
        writer.finish()
    assert writer.transactions > 100
    ok(cli(path, env, "sync", "--until-caught-up"))



@pytest.mark.parametrize("source, phase, exactly_once", [
    ("mysql", "backfill", True),  # inside a split's commit transaction, while the log window is replayed
    ("mysql", "catch_up", True),  # the third checkpoint of the catch-up after the snapshot
    ("mysql", "apply_before_checkpoint", True),  # batch applied, its transaction (with the checkpoint) not committed
    ("mysql", "steady_state", True),  # an outside SIGKILL while following a writer
    ("mysql", "apply_before_checkpoint", False),  # sqlite positions: target committed, checkpoint not written
    ("postgres", "catch_up", False),  # PostgreSQL sources are at-least-once
    ("postgres", "apply_before_checkpoint", False),
    ("postgres", "steady_state", False),
])
def test_sigkill_in_incremental_phase_loses_nothing(tmp_path, servers, unique_name, spark, source, phase,
                                                    exactly_once):
    server = servers.mariadb if source == "mysql" else servers.postgres
    server.create_database(unique_name)
    src = server.connect(unique_name)
    with src.cursor() as cur:
        for statement in MYSQL_TABLES if source == "mysql" else POSTGRES_TABLES:
            cur.execute(statement)
    ns = unique_name if source == "mysql" else "public"
    target = f"{unique_name}_tgt"
    servers.postgres.create_database(target)
    resumer = {"resume_type": "from_target"} if exactly_once else {"resume_type": "sqlite"}
    # A task id per PostgreSQL test: its slot is cluster-wide, and a killed run's walsender may still hold it.
    task_id = "crash_inc" if source == "mysql" else f"crash_{unique_name}"
    path = write_config(tmp_path, servers, task_id=task_id, source=source, source_db=unique_name,
                        tables=[f"{ns}.{t}" for t in TABLES], target="postgres", target_db=target,
                        snapshot={"split_size": SPLIT, "partitions_per_run": 2}, resumer=resumer,
                        pipeline={"exactly_once": exactly_once, "checkpoint_after_events": 40,
                                  "checkpoint_interval_secs": 0.5})
    config = load_config(path)
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    tgt = servers.postgres.connect(target)
    tgt.autocommit = True

    rt = TaskRuntime(config)
    rt.adopt_spark(spark)
    plans = ensure_plans(rt)  # creates the target tables: audit them from their first row on
    with tgt.cursor() as cur:
        cur.execute(AUDIT)
        for t in TABLES:
            cur.execute(f'CREATE TRIGGER audit AFTER INSERT OR UPDATE ON "{ns}".{t} '
                        "FOR EACH ROW EXECUTE FUNCTION public.audit_row()")

    writer = Writer(server, unique_name, key_changes=source == "postgres")
    crash_and_resume(rt, plans, path, env, writer, phase, exactly_once)

    for t in TABLES:
        got, want = fetch_rows(tgt, f'"{ns}".{t}', "id"), fetch_rows(src, t, "id")
        assert got == want, f"{t} differs: {differences(got, want, writer.moved)}"
    if exactly_once:
        with tgt.cursor() as cur:
            cur.execute("SELECT tbl, id, v, COUNT(DISTINCT tx) FROM public.audit GROUP BY tbl, id, v "
                        "HAVING COUNT(DISTINCT tx) > 1 LIMIT 5")
            assert cur.fetchall() == [], "a row version was applied by two transactions"
            # What each transaction left visible: the last version it wrote per row (a backfill may step a row
            # through older versions inside the commit transaction, which nobody can see).
            cur.execute("SELECT tbl, id, (array_agg(v ORDER BY seq DESC))[1], max(seq) FROM public.audit "
                        "GROUP BY tbl, id, tx ORDER BY max(seq)")
            visible: dict[tuple, int] = {}
            for tbl, id_, v, _ in cur.fetchall():
                assert v > visible.get((tbl, id_), -1), f"{tbl}.{id_} went back from {visible[(tbl, id_)]} to {v}"
                visible[(tbl, id_)] = v
    tgt.close()
    src.close()


# The audit on a MariaDB target: a transaction-precise system-versioned table stamps every row with the id of
# the transaction that inserted it (INNODB_TRX would not do: InnoDB refreshes that view at most every 0.1 s, so
# a trigger could read the previous transaction's id). MariaDB triggers fire on one event each.
MARIADB_AUDIT = """CREATE TABLE audit (seq BIGINT AUTO_INCREMENT PRIMARY KEY, tbl VARCHAR(10), id INT, v INT,
  tx BIGINT UNSIGNED GENERATED ALWAYS AS ROW START INVISIBLE,
  tx_end BIGINT UNSIGNED GENERATED ALWAYS AS ROW END INVISIBLE,
  PERIOD FOR SYSTEM_TIME (tx, tx_end)) ENGINE=InnoDB WITH SYSTEM VERSIONING"""


def audit_mariadb(conn, database: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"USE `{database}`")
        cur.execute(MARIADB_AUDIT)
        for t in TABLES:
            for event in ("INSERT", "UPDATE"):
                cur.execute(f"CREATE TRIGGER audit_{t}_{event.lower()} AFTER {event} ON {t} FOR EACH ROW "
                            f"INSERT INTO audit (tbl, id, v) VALUES ('{t}', NEW.id, NEW.v)")


def assert_audit_exactly_once(rows: list[tuple]) -> None:
    """`rows`: (tbl, id, v, tx) in the order they were written. No row version committed by two transactions;
    per row, what each transaction left visible (its last version of it) only ever goes forward."""
    writers: dict[tuple, set] = {}
    last_by_tx: dict[tuple, int] = {}  # (tbl, id, tx) -> the last version, in the order the transactions wrote
    for tbl, id_, v, tx in rows:
        writers.setdefault((tbl, id_, v), set()).add(tx)
        last_by_tx.pop((tbl, id_, tx), None)
        last_by_tx[(tbl, id_, tx)] = v
    twice = [version for version, txs in writers.items() if len(txs) > 1][:5]
    assert twice == [], f"row versions applied by two transactions: {twice}"
    visible: dict[tuple, int] = {}
    for (tbl, id_, _), v in last_by_tx.items():
        assert v > visible.get((tbl, id_), -1), f"{tbl}.{id_} went back from {visible[(tbl, id_)]} to {v}"
        visible[(tbl, id_)] = v


@pytest.mark.parametrize("phase, exactly_once", [
    ("backfill", True),  # inside a split's commit transaction, while the log window is replayed
    ("catch_up", True),  # the third checkpoint of the catch-up after the snapshot
    ("apply_before_checkpoint", True),  # batch applied, its transaction (with the checkpoint) not committed
    ("steady_state", True),  # an outside SIGKILL while following a writer
    ("apply_before_checkpoint", False),  # sqlite positions: target committed, checkpoint not written: replayed
])
def test_sigkill_in_incremental_phase_into_mariadb_loses_nothing(tmp_path, servers, mariadb_target, unique_name,
                                                                 spark, phase, exactly_once):
    """As above into a MariaDB target (the second server: the target database is named like the source's),
    where `from_target` keeps the position table in the target."""
    servers.mariadb.create_database(unique_name)
    src = servers.mariadb.connect(unique_name)
    with src.cursor() as cur:
        for t in TABLES:
            cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20))")
            cur.execute(f"INSERT INTO {t} SELECT seq, 0, 'seed' FROM seq_1_to_{ROWS}")
    resumer = {"resume_type": "from_target"} if exactly_once else {"resume_type": "sqlite"}
    # The task id is the test's: the position table on the shared target server holds every test's records.
    path = write_config(tmp_path, servers, task_id=f"crash_inc_{unique_name}", source="mysql",
                        source_db=unique_name, tables=[f"{unique_name}.{t}" for t in TABLES], target="mysql",
                        target_db="", target_server=mariadb_target,
                        snapshot={"split_size": SPLIT, "partitions_per_run": 2}, resumer=resumer,
                        pipeline={"exactly_once": exactly_once, "checkpoint_after_events": 40,
                                  "checkpoint_interval_secs": 0.5})
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    tgt = mariadb_target.connect()

    rt = TaskRuntime(load_config(path))
    rt.adopt_spark(spark)
    plans = ensure_plans(rt)  # creates the target tables: audit them from their first row on
    audit_mariadb(tgt, unique_name)
    writer = Writer(servers.mariadb, unique_name)
    crash_and_resume(rt, plans, path, env, writer, phase, exactly_once)

    try:
        for t in TABLES:
            assert fetch_rows(tgt, f"`{unique_name}`.{t}", "id") == fetch_rows(src, t, "id"), f"{t} differs"
        if exactly_once:
            with tgt.cursor() as cur:
                cur.execute(f"SELECT tbl, id, v, tx FROM `{unique_name}`.audit ORDER BY seq")
                rows = cur.fetchall()
            assert len(rows) > 3 * ROWS  # the snapshot's rows and the log's
            assert_audit_exactly_once(rows)
    finally:
        with tgt.cursor() as cur:
            cur.execute(f"DROP DATABASE `{unique_name}`")
        tgt.close()
        src.close()
