"""Verification under a steady writer, on real servers: a sync thread applies the log while a writer thread
updates and inserts rows of every split. One corrupted target row fails exactly its split (CLI engine path and
the Dagster asset check on a real instance); materializing that partition repairs it, while the writer goes on;
with no corruption, every split passes round after round (no false alarm)."""
import random
import subprocess
import threading
import time

import dagster as dg
import pytest

from cdc_assets.config import load_config
from cdc_assets.defs.build import build_definitions
from cdc_assets.defs.checks import SPLIT_CHECK, TABLE_CHECK
from cdc_assets.defs.names import asset_key
from cdc_assets.defs.partitions import register
from cdc_assets.defs.resources import CdcTask, task_spark
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine import verify_hold, verify_sync
from cdc_assets.engine.verify import FAILED, INCONCLUSIVE, PASSED, verify_table
from cdc_assets_tests.support import cli_command, snapshot_all, source_database, write_config

ROWS = 600
CORRUPT = 250  # in the second split; the writer leaves it alone, so only the repair can make it right again
MYSQL_SEED = [
    "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2), seen DATETIME(3), "
    "flags BIT(4), doc JSON)",
    f"INSERT INTO items SELECT seq, CONCAT('item ', seq), seq / 3, '2026-01-02 03:04:05.678', b'0101', "
    f"'{{\"a\": 1, \"b\": [1, 2]}}' FROM seq_1_to_{ROWS}",
]
POSTGRES_SEED = [
    "CREATE SCHEMA {ns}",
    "CREATE TABLE {ns}.items (id INT PRIMARY KEY, name VARCHAR(40), price NUMERIC(10,2), seen TIMESTAMPTZ(3), "
    "flags BIT(4), doc JSONB)",
    f"INSERT INTO {{ns}}.items SELECT g, 'item ' || g, g / 3.0, '2026-01-02 03:04:05.678+00', B'0101', "
    f"'{{\"a\": 1, \"b\": [1, 2]}}' FROM generate_series(1, {ROWS}) g",
]


@pytest.fixture(params=["mysql", "postgres"])
def task(request, tmp_path, servers, unique_name, pg_target, spark):
    """A snapshotted task into PostgreSQL, a running sync and a running writer; yields (config path, config,
    runtime, source kind, namespace, target connection, writer)."""
    kind = request.param
    seed = MYSQL_SEED if kind == "mysql" else [s.replace("{ns}", unique_name) for s in POSTGRES_SEED]
    with source_database(servers, kind, unique_name, seed):
        path = write_config(tmp_path, servers, task_id=f"ver_{unique_name}", source=kind, source_db=unique_name,
                            tables=[f"{unique_name}.items"], target="postgres", target_db=pg_target[0],
                            snapshot={"split_size": 200},
                            pipeline={"checkpoint_interval_secs": 0.3, "checkpoint_after_events": 200})
        config = load_config(path)
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        snapshot_all(rt)
        stop = threading.Event()
        syncer = TaskRuntime(config)
        sync_thread = threading.Thread(target=sync, args=(syncer,), kwargs={"stop": stop}, daemon=True)
        sync_thread.start()
        writer = Writer(servers, kind, unique_name)
        writer.start()
        first_checkpoint(rt)
        try:
            yield path, config, rt, kind, unique_name, pg_target[1], writer
        finally:
            writer.stop()
            stop.set()
            sync_thread.join(60)
            syncer.close()
            rt.close()
        assert writer.commits > 20, "the writer must have been writing all along"


def first_checkpoint(rt: TaskRuntime) -> None:
    """The sync's first checkpoint (after the first change): verification does not wait for a sync to start."""
    deadline = time.monotonic() + 60
    while rt.resumer.checkpoint() is None and time.monotonic() < deadline:
        time.sleep(0.2)


class Writer(threading.Thread):
    """Small transactions on every split (updates, inserts past the end), never on the CORRUPT row."""

    def __init__(self, servers, kind: str, ns: str) -> None:
        super().__init__(daemon=True)
        server = servers.mariadb if kind == "mysql" else servers.postgres
        self.conn = server.connect(ns)
        self.table = "items" if kind == "mysql" else f"{ns}.items"
        self.halt = threading.Event()
        self.commits = 0
        self.next_id = ROWS + 1

    def run(self) -> None:
        rng = random.Random(7)
        with self.conn.cursor() as cur:
            while not self.halt.is_set():
                key = rng.choice([k for k in rng.sample(range(1, ROWS + 1), 3) if k != CORRUPT] or [1])
                cur.execute(f"UPDATE {self.table} SET name = %s, price = price + 1 WHERE id = %s",
                            (f"w{self.commits}", key))
                if self.commits % 5 == 0:
                    cur.execute(f"INSERT INTO {self.table} (id, name, price) VALUES (%s, 'new', 1.5)", (self.next_id,))
                    self.next_id += 1
                self.commits += 1
                time.sleep(0.005)

    def stop(self) -> None:
        self.halt.set()
        self.join(60)
        self.conn.close()


def test_corrupted_row_fails_exactly_its_split_and_materializing_repairs_it(task):
    path, config, rt, kind, ns, target, writer = task
    table = config.source.table_ids[0]
    bad = f"{table}:0001"
    with target.cursor() as cur:
        cur.execute(f'UPDATE "{ns}".items SET name = %s WHERE id = %s', ("corrupted", CORRUPT))
        assert cur.rowcount == 1

    checks = verify_table(rt, table, wait_secs=60)
    assert {c.split_id: c.status for c in checks} == {c.split_id: FAILED if c.split_id == bad else PASSED
                                                      for c in checks}, [c.line() for c in checks]
    [failed] = [c for c in checks if c.status == FAILED]
    assert f"different 1 ({CORRUPT})" in failed.detail and "materialize partition" in failed.detail

    cli = subprocess.run(cli_command(path, "verify", "--table", str(table), "--wait", "60"), capture_output=True,
                         text=True, timeout=300)
    assert cli.returncode == 1, cli.stderr
    assert f"{bad}: FAILED" in cli.stdout and f"{table}:0000: PASSED" in cli.stdout, cli.stdout

    defs = build_definitions(config, str(path))
    asset = defs.get_assets_def(asset_key(config.task_id, table))
    split_check = defs.get_asset_checks_def(dg.AssetCheckKey(asset.key, SPLIT_CHECK))
    table_check = defs.get_asset_checks_def(dg.AssetCheckKey(asset.key, TABLE_CHECK))
    resources = {"cdc_task": CdcTask(config_path=str(path)), "pyspark": task_spark(config)}
    with dg.instance_for_test() as instance:
        register(instance, config.task_id, [tp.plan for tp in ensure_plans(rt)])

        def evaluate(check, partition_key=None):
            # As the UI's "Execute check" on a partition does: the run carries the partition as its tag (Dagster
            # 1.13 derives a run's partitions definition from selected assets, and only the check is selected).
            tags = {"dagster/partition": partition_key} if partition_key else {}
            result = dg.materialize([asset, check], instance=instance, resources=resources,
                                    selection=dg.AssetSelection.checks(check), tags=tags)
            [evaluation] = result.get_asset_check_evaluations()
            return evaluation

        assert not evaluate(split_check, partition_key=bad).passed
        assert evaluate(split_check, partition_key=f"{table}:0000").passed
        whole = evaluate(table_check)
        assert not whole.passed and whole.metadata["failed_splits"].value == bad

        # The UI's repair: materialize the failing partition. The writer and the sync keep going meanwhile.
        materialized = dg.materialize([asset], instance=instance, resources=resources, partition_key=bad)
        assert materialized.success
        assert materialized.asset_materializations_for_node(asset.node_def.name)[0].metadata["splits_skipped"].value == 0
        assert evaluate(split_check, partition_key=bad).passed
        # Repaired: a second materialization skips the split again (finished, and no failed verification).
        again = dg.materialize([asset], instance=instance, resources=resources, partition_key=bad)
        assert again.asset_materializations_for_node(asset.node_def.name)[0].metadata["splits_skipped"].value == 1
    assert all(c.status == PASSED for c in verify_table(rt, table, wait_secs=60))


def test_no_false_alarm_under_a_steady_writer(task, servers):
    path, config, rt, kind, ns, target, writer = task
    table = config.source.table_ids[0]
    rechecked, sessions = 0, source_sessions(servers, kind, ns)
    for round_ in range(3):
        before = writer.commits
        checks = verify_table(rt, table, wait_secs=60)
        assert [c.status for c in checks] == [PASSED] * len(checks), [c.line() for c in checks]
        assert sum(c.source_rows for c in checks) >= ROWS
        assert writer.commits > before, f"round {round_}: the writer must commit while verification runs"
        rechecked += sum(c.rechecked for c in checks)
    # Keys the writer changed around a first read were judged again: without that, they would have failed.
    assert rechecked > 0
    if kind == "postgres":  # each new session is a server process started: the rounds read on the source's own
        opened = source_sessions(servers, kind, ns) - sessions
        assert opened == 0, f"{opened} sessions opened on the source database by 3 rounds of verification"


def source_sessions(servers, kind: str, database: str) -> int:
    """Sessions ever opened on a PostgreSQL database (pg_stat_database.sessions, PostgreSQL 14+), by a session of
    another database so as not to count itself; 0 for MySQL."""
    if kind != "postgres":
        return 0
    conn = servers.postgres.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", (database,))
            return int(cur.fetchone()[0])
    finally:
        conn.close()


TEXT_KEYS = ["a", "B", "c", "D", "e", "F", "g", "H", "i", "J", "k", "L", "m", "N", "o", "P"]


def test_text_keys_whose_order_differs_in_the_target(tmp_path, servers, unique_name, pg_target, spark):
    """MySQL's case-insensitive order puts 'B' between 'a' and 'c'; PostgreSQL's byte order does not: each split's
    rows are looked up by key in the target, and keys the target ranges hold for another split are not extra."""
    seed = ["CREATE TABLE words (w VARCHAR(10) PRIMARY KEY, n INT)",
            "INSERT INTO words VALUES " + ", ".join(f"('{k}', {i})" for i, k in enumerate(TEXT_KEYS))]
    with source_database(servers, "mysql", unique_name, seed) as conn:
        path = write_config(tmp_path, servers, task_id=f"vt_{unique_name}", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.words"], target="postgres", target_db=pg_target[0],
                            snapshot={"split_size": 4}, pipeline={"checkpoint_interval_secs": 0.3})
        config = load_config(path)
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        snapshot_all(rt)
        table = config.source.table_ids[0]
        plan = rt.plans.load(table)
        assert plan.key_kind == "string" and len(plan.splits) >= 3
        stop = threading.Event()
        syncer = TaskRuntime(config)
        thread = threading.Thread(target=sync, args=(syncer,), kwargs={"stop": stop}, daemon=True)
        thread.start()
        try:
            with conn.cursor() as cur:
                cur.execute("UPDATE words SET n = n + 100 WHERE w = 'a'")
            first_checkpoint(rt)
            first = verify_table(rt, table, wait_secs=60)
            assert all(c.status == PASSED for c in first), [c.line() for c in first]
            with pg_target[1].cursor() as cur:
                cur.execute(f'UPDATE "{unique_name}".words SET n = -1 WHERE w = %s', ("H",))
            checks = verify_table(rt, table, wait_secs=60)
            holder = next(s.id for s in plan.splits
                          if (s.range.start is None or s.range.start.lower() <= "h")
                          and (s.range.end is None or "h" < s.range.end.lower()))
            assert {c.split_id for c in checks if c.status == FAILED} == {holder}, [c.line() for c in checks]
            assert all(c.status == PASSED for c in checks if c.split_id != holder)
        finally:
            stop.set()
            thread.join(60)
            syncer.close()
            rt.close()


LO, HI, MOVE = 20, 180, 100_000  # two rows of split 0; a key moved by MOVE lands past every split's rows


class Churner(threading.Thread):
    """Transactions that change a key and delete and re-insert a row of split 0, locking HI before LO, as verify's
    ascending locking read never does, and holding them a while (one in four past the hold's 1 s lock wait). Each
    has the sync apply it like any other change. Its own deadlocks and lock wait timeouts roll it back."""

    def __init__(self, servers, kind: str, ns: str) -> None:
        super().__init__(daemon=True)
        server = servers.mariadb if kind == "mysql" else servers.postgres
        self.conn = server.connect(ns)
        self.table = "items" if kind == "mysql" else f"{ns}.items"
        self.halt = threading.Event()
        self.commits = self.refused = 0

    def run(self) -> None:
        t = self.table
        with self.conn.cursor() as cur:
            while not self.halt.is_set():
                try:
                    cur.execute("BEGIN")
                    cur.execute(f"UPDATE {t} SET id = id + {MOVE} WHERE id = %s", (HI,))
                    time.sleep(1.3 if self.commits % 4 == 3 else 0.2)
                    cur.execute(f"DELETE FROM {t} WHERE id = %s", (LO,))
                    cur.execute(f"INSERT INTO {t} (id, name, price) VALUES (%s, %s, 1.5)", (LO, f"again {self.commits}"))
                    cur.execute(f"UPDATE {t} SET id = id - {MOVE} WHERE id = %s", (HI + MOVE,))
                    cur.execute("COMMIT")
                    self.commits += 1
                except Exception:  # noqa: BLE001 - chosen as a deadlock's victim, or our own lock wait ran out
                    cur.execute("ROLLBACK")
                    self.refused += 1
                time.sleep(0.4)  # a writer that never lets go of the range leaves verify inconclusive (tested below)

    def stop(self) -> None:
        self.halt.set()
        self.join(60)
        self.conn.close()


def test_a_busy_source_is_retried_and_counted_never_a_traceback(task, servers):
    """A writer changing keys and deleting and re-inserting rows of the verified range makes the hold's locking
    read deadlock or time out: verify takes the hold again, counts it, and its verdicts stay right."""
    path, config, rt, kind, ns, target, writer = task
    table = config.source.table_ids[0]
    first = rt.plans.load(table).splits[0]
    assert first.range.start is None and first.range.end > HI
    bad = f"{table}:0001"
    with target.cursor() as cur:
        cur.execute(f'UPDATE "{ns}".items SET name = %s WHERE id = %s', ("corrupted", CORRUPT))
    churner = Churner(servers, kind, ns)
    churner.start()
    try:
        refusals = []
        for _ in range(8):  # until the hold was refused a few times; every round's verdicts must be right
            checks = verify_table(rt, table, wait_secs=60, hold=True)
            assert {c.split_id: c.status for c in checks} == {c.split_id: FAILED if c.split_id == bad else PASSED
                                                              for c in checks}, [c.line() for c in checks]
            refusals += [c.refusals for c in checks if c.retries]
            if refusals and (kind != "mysql" or any("deadlock" in r for r in refusals)):
                break  # what the assertions below need was seen: each round costs the hold's waits
        assert refusals, "the churner never got in the hold's way"
        if kind == "mysql":  # InnoDB refused the hold: as a deadlock's victim, or, as timing has it, by a lock wait
            # running out (both retried and counted); PostgreSQL's LOCK TABLE only waits
            assert all("deadlock" in r or "lock wait timeout" in r for r in refusals), refusals
        cli = subprocess.run(cli_command(path, "verify", "--wait", "60", "--hold"), capture_output=True, text=True,
                             timeout=300)
        assert cli.returncode == 1 and "Traceback" not in cli.stderr, cli.stderr
        assert f"{bad}: FAILED" in cli.stdout and f"{table}:0000: PASSED" in cli.stdout, cli.stdout
    finally:
        churner.stop()
    print(f"{kind}: hold refusals {refusals}; churner {churner.commits} commits, {churner.refused} refused")
    assert churner.commits > 3


def test_a_source_too_busy_for_every_try_is_inconclusive(task, servers, monkeypatch):
    """A transaction that keeps a row of split 0 locked past every try: with `--hold` the split is inconclusive,
    "the source was busy"; the lock-free comparison (the default, and the split check's) never waits for it and
    passes; once it ends, the held comparison passes too."""
    path, config, rt, kind, ns, target, writer = task
    monkeypatch.setattr(verify_hold, "BUSY_TRIES", 2)
    table = config.source.table_ids[0]
    split = f"{table}:0000"
    server = servers.mariadb if kind == "mysql" else servers.postgres
    blocker = server.connect(ns)
    try:
        with blocker.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"UPDATE {'items' if kind == 'mysql' else ns + '.items'} SET name = 'held' WHERE id = %s",
                        (LO,))
            [check] = verify_table(rt, table, [split], wait_secs=60, hold=True)
            assert check.status == INCONCLUSIVE and check.detail.startswith("the source was busy"), check.line()
            assert check.retries == 2 and "lock wait timeout" in check.refusals, check.line()

            defs = build_definitions(config, str(path))
            asset = defs.get_assets_def(asset_key(config.task_id, table))
            split_check = defs.get_asset_checks_def(dg.AssetCheckKey(asset.key, SPLIT_CHECK))
            resources = {"cdc_task": CdcTask(config_path=str(path)), "pyspark": task_spark(config)}
            with dg.instance_for_test() as instance:
                register(instance, config.task_id, [tp.plan for tp in ensure_plans(rt)])
                result = dg.materialize([asset, split_check], instance=instance, resources=resources,
                                        selection=dg.AssetSelection.checks(split_check),
                                        tags={"dagster/partition": split})
                [evaluation] = result.get_asset_check_evaluations()
            assert evaluation.passed, evaluation.description
            assert evaluation.metadata["busy_retries"].value == 0
            cur.execute("ROLLBACK")
    finally:
        blocker.close()
    [check] = verify_table(rt, table, [split], wait_secs=60, hold=True)
    assert check.status == PASSED and check.retries == 0, check.line()


def test_verify_without_a_running_sync_says_so_once_at_once(tmp_path, servers, unique_name, pg_target, spark,
                                                             monkeypatch):
    """As an operator runs it: `cdc-assets verify` while no sync runs and the source moved on since the last
    checkpoint says so once (not per split, not after each split's --wait), with the way out, exit 3: after one
    --wait while the checkpoint is fresh (a sync launched run by run may be between two runs), at once when it is
    stale. Once a sync caught up (and stopped), the same command compares every split."""
    with source_database(servers, "mysql", unique_name, MYSQL_SEED) as conn:
        path = write_config(tmp_path, servers, task_id=f"vn_{unique_name}", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.items"], target="postgres", target_db=pg_target[0],
                            snapshot={"split_size": 150}, pipeline={"checkpoint_interval_secs": 0.3})
        config = load_config(path)
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        try:
            snapshot_all(rt)
            splits = rt.plans.load(config.source.table_ids[0]).splits
            assert len(splits) >= 4
            sync(rt, until_caught_up=True)
            with conn.cursor() as cur:
                cur.execute("UPDATE items SET name = 'later' WHERE id = 7")  # the checkpoint is behind now
            wait = 10
            started = time.monotonic()
            cli = subprocess.run(cli_command(path, "verify", "--wait", str(wait)), capture_output=True, text=True,
                                 timeout=300)
            elapsed = time.monotonic() - started
            assert cli.returncode == 3, cli.stderr
            lines = cli.stdout.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("INCONCLUSIVE: no sync is running"), cli.stdout
            assert "cdc-assets sync" in lines[0] and "sensor" in lines[0], lines[0]
            assert not any(s.id in cli.stdout for s in splits), cli.stdout
            assert elapsed < wait + 30, f"{elapsed:.1f} s: it waited for a checkpoint that could not move"
            print(f"verify without a sync: {elapsed:.1f} s for {len(splits)} splits, --wait {wait}")

            monkeypatch.setattr(verify_sync, "STALE_SECS", 0.0)  # as if the last sync ended long ago
            started = time.monotonic()
            state = verify_sync.sync_state(rt, wait)
            assert state.blocked.startswith("no sync is running") and "is behind the source's log end" in state.blocked
            print(f"with a stale checkpoint: {time.monotonic() - started:.2f} s")

            sync(rt, until_caught_up=True)  # the way out; caught up, a stopped sync leaves nothing to wait for
            cli = subprocess.run(cli_command(path, "verify", "--wait", str(wait)), capture_output=True, text=True,
                                 timeout=300)
            assert cli.returncode == 0, cli.stdout + cli.stderr
            assert f"{len(splits)}/{len(splits)} splits equal" in cli.stdout, cli.stdout
        finally:
            rt.close()
