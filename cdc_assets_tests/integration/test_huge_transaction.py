"""Transactions larger than `pipeline.transaction_part_events` are read in parts of exactly that many changes
and applied part by part inside one target transaction: the target ends equal to the source, row by row,
including key changes, deletes and (PostgreSQL) partial rows of unchanged TOAST values spread over parts."""
import secrets

import pytest

from cdc_assets.core.events import Transaction, TransactionPart
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import describe, ensure_plans
from cdc_assets.engine.runtime import PhaseHooks, TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets_tests.support import config_for, fetch_rows, source_database

PART = 1000
ROWS = 20_000
BIG = secrets.token_hex(40_000)  # incompressible: TOASTed by PostgreSQL, so later updates log it as unchanged
# note of 10 BIG rows, ROWS inserts, ROWS + 10 updates of v, 50 key changes, 101 deletes
BIG_TX_CHANGES = 10 + ROWS + ROWS + 10 + 50 + 101


def seed(kind: str, db: str) -> list[str]:
    body = "LONGTEXT" if kind == "mysql" else "TEXT"
    return ([f'CREATE SCHEMA "{db}"'] if kind == "postgres" else []) + [
        f"CREATE TABLE {table(kind, db)} (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40), body {body})"]


def table(kind: str, db: str) -> str:
    return f"`{db}`.t" if kind == "mysql" else f'"{db}".t'


def big_rows(kind: str, db: str) -> str:
    """One transaction: rows with TOASTed bodies."""
    series = "seq_900001_to_900010" if kind == "mysql" else "generate_series(900001, 900010) seq"
    return f"INSERT INTO {table(kind, db)} SELECT seq, 0, 'big', '{BIG}' FROM {series}"


def big_transaction(kind: str, db: str) -> list[str]:
    """One transaction of BIG_TX_CHANGES changes: partial rows first (PostgreSQL), then inserts, updates of every
    row (their inserts lie in earlier parts), key changes and deletes of keys inserted parts before."""
    series, t = (f"seq_1_to_{ROWS}" if kind == "mysql" else f"generate_series(1, {ROWS}) seq"), table(kind, db)
    return [f"UPDATE {t} SET note = 'touched' WHERE id > 900000",
            f"INSERT INTO {t} SELECT seq, 0, 'row', NULL FROM {series}",
            f"UPDATE {t} SET v = v + 1",
            f"UPDATE {t} SET id = id + 100000 WHERE id <= 50",
            f"DELETE FROM {t} WHERE id BETWEEN 1000 AND 1100"]


def in_one_transaction(conn, statements: list[str]) -> None:
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        for statement in statements:
            cur.execute(statement)
        cur.execute("COMMIT")


def task_config(tmp_path, servers, kind: str, db: str, target_kind: str, target_db: str, task: str, **pipeline):
    return config_for(tmp_path, servers, task_id=task, source=kind, source_db=db, tables=[f"{db}.t"],
                      target=target_kind, target_db=target_db, resumer={"resume_type": "from_target"},
                      pipeline={"startup_mode": "latest", "transaction_part_events": PART,
                                "checkpoint_after_events": 500, **pipeline})


def target_db(servers, target_kind: str, name: str):
    server = servers.postgres if target_kind == "postgres" else servers.mariadb
    server.create_database(name)
    conn = server.connect(name)
    conn.autocommit = True
    return conn


def assert_same(source_conn, src_table: str, target_conn, tgt_table: str) -> None:
    want = fetch_rows(source_conn, src_table, "id")
    got = fetch_rows(target_conn, tgt_table, "id")
    assert len(got) == len(want) and got == want, f"{len(got)} rows in the target, {len(want)} in the source"


@pytest.mark.parametrize("kind", ["mysql", "postgres"])
def test_reader_hands_out_parts_of_the_bound_then_the_rest(tmp_path, servers, unique_name, kind):
    with source_database(servers, kind, unique_name, seed(kind, unique_name)) as conn:
        config = task_config(tmp_path, servers, kind, unique_name, "postgres", f"{unique_name}_tgt", f"p_{unique_name}")
        target_db(servers, "postgres", f"{unique_name}_tgt").close()
        rt = TaskRuntime(config)
        try:
            ensure_plans(rt)  # for PostgreSQL: the slot, from which the transaction below is decoded
            start = rt.source.current_position()
            in_one_transaction(conn, [big_rows(kind, unique_name)])
            in_one_transaction(conn, big_transaction(kind, unique_name))
            schemas = {t: describe(rt, t) for t in config.source.table_ids}
            reader = rt.log.reader(schemas, purpose="parts_probe")
            items = [i for i in reader.read(start, stop_at=rt.source.current_position(), part_events=PART)
                     if isinstance(i, (Transaction, TransactionPart))]
        finally:
            rt.close()
    # Parts of exactly PART changes: the reader never handed out (so never held) more at once.
    sizes = [(type(i).__name__, len(i.changes)) for i in items]
    assert sizes == ([("Transaction", 10)] + [("TransactionPart", PART)] * (BIG_TX_CHANGES // PART)
                     + [("Transaction", BIG_TX_CHANGES % PART)])
    final = items[-1]
    assert all(p.floor.sort_key() < final.end.sort_key() for p in items[1:-1])


# MySQL to MySQL would write into the source's own database: the target keeps the source's namespaces.
@pytest.mark.parametrize("kind, target_kind", [("mysql", "postgres"), ("postgres", "mysql"), ("postgres", "postgres")])
def test_transaction_in_parts_ends_equal_to_the_source(tmp_path, servers, unique_name, kind, target_kind):
    tgt_name = f"{unique_name}_tgt"
    tgt = target_db(servers, target_kind, tgt_name)
    with source_database(servers, kind, unique_name, seed(kind, unique_name)) as conn:
        rt = TaskRuntime(task_config(tmp_path, servers, kind, unique_name, target_kind, tgt_name, f"a_{unique_name}"))
        try:
            ensure_plans(rt)
            assert sync(rt, until_caught_up=True).events == 0  # the checkpoint: the log end, before what follows
            in_one_transaction(conn, [big_rows(kind, unique_name)])
            in_one_transaction(conn, big_transaction(kind, unique_name))
            report = sync(rt, until_caught_up=True)
        finally:
            rt.close()
        assert report.events == 10 + BIG_TX_CHANGES and report.transactions == 2
        assert_same(conn, table(kind, unique_name), tgt, table(target_kind, unique_name))
    tgt.close()


@pytest.mark.parametrize("kind", ["mysql", "postgres"])
def test_a_transaction_of_whole_parts_commits_at_its_empty_end(tmp_path, servers, unique_name, kind):
    """Every change went out in parts: the Transaction that ends it has no changes left, and must still come."""
    tgt_name = f"{unique_name}_tgt"
    tgt = target_db(servers, "postgres", tgt_name)
    with source_database(servers, kind, unique_name, seed(kind, unique_name)) as conn:
        rt = TaskRuntime(task_config(tmp_path, servers, kind, unique_name, "postgres", tgt_name, f"w_{unique_name}"))
        try:
            ensure_plans(rt)
            sync(rt, until_caught_up=True)
            series = f"seq_1_to_{3 * PART}" if kind == "mysql" else f"generate_series(1, {3 * PART}) seq"
            in_one_transaction(conn, [f"INSERT INTO {table(kind, unique_name)} SELECT seq, 1, 'x', NULL FROM {series}"])
            report = sync(rt, until_caught_up=True)
        finally:
            rt.close()
        assert (report.events, report.transactions) == (3 * PART, 1)
        assert_same(conn, table(kind, unique_name), tgt, table("postgres", unique_name))
    tgt.close()


def test_exactly_once_holds_a_transaction_in_parts_that_committed_while_the_snapshot_ran(tmp_path, servers, spark,
                                                                                        unique_name):
    """Which changes the snapshot already holds depends on the transaction's end, known only at its commit: the
    parts are held, then filtered whole. Applied unfiltered, the big update would put back v = 1 on rows the
    snapshot read at v = 11, and the later update (skipped: the snapshot holds it) would never repair them."""
    tgt_name, t = f"{unique_name}_tgt", table("mysql", unique_name)
    tgt = target_db(servers, "postgres", tgt_name)
    statements = seed("mysql", unique_name) + [f"INSERT INTO {t} SELECT seq, 0, 'seed', NULL FROM seq_1_to_2000"]
    with source_database(servers, "mysql", unique_name, statements) as conn:
        fired = []

        def during_the_first_split(ids: list[str]) -> None:
            if not fired:
                fired.append(ids)
                in_one_transaction(conn, [f"UPDATE {t} SET v = v + 1"])  # 2000 changes: 20 parts
                # Keys of the second split, in a transaction small enough to come whole.
                in_one_transaction(conn, [f"UPDATE {t} SET v = v + 10 WHERE id > 1950"])

        config = task_config(tmp_path, servers, "mysql", unique_name, "postgres", tgt_name, f"x_{unique_name}",
                             startup_mode="initial", exactly_once=True, transaction_part_events=100)
        config = config.model_copy(update={"snapshot": config.snapshot.model_copy(update={"split_size": 1000})})
        rt = TaskRuntime(config, hooks=PhaseHooks(after_low=during_the_first_split))
        rt.adopt_spark(spark)
        try:
            (plan,) = ensure_plans(rt)
            assert len(plan.plan.splits) == 2
            for split in plan.plan.splits:  # one group each: the second reads after both updates
                snapshot_splits(rt, plan.plan.table, [split.id])
            report = sync(rt, until_caught_up=True)
        finally:
            rt.close()
        assert fired and (report.skipped, report.events) == (2000 + 50, 0)
        assert_same(conn, t, tgt, table("postgres", unique_name))
    tgt.close()
