"""A key-changing UPDATE whose new image lacks an unchanged TOASTed column (PostgreSQL, REPLICA IDENTITY DEFAULT)
moves the row to its new key with the value the target holds under the old key, into both target kinds."""
import secrets
from contextlib import contextmanager

import pytest

from cdc_assets.core.batches import MoveIncomplete
from cdc_assets.engine import savepoints
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import PhaseHooks, TaskRuntime
from cdc_assets.sinks import move_marks
from cdc_assets_tests.support import config_for, fetch_rows, run_transactions, snapshot_all, source_database

BIG = secrets.token_hex(40_000)  # incompressible: stored out of line, so an update not touching it logs it unchanged


@contextmanager
def key_move_task(servers, unique_name, tmp_path, kind: str, pipeline: dict):
    """(runtime started at the log end, source connection, target connection, namespace, target table)"""
    ns, target_db = unique_name, f"{unique_name}_tgt"
    seed = [f"CREATE SCHEMA {ns}", f"CREATE TABLE {ns}.t (id INT PRIMARY KEY, doc TEXT, n INT)"]
    with source_database(servers, "postgres", unique_name, seed) as src:
        if kind == "postgres":
            servers.postgres.create_database(target_db)
            tgt = servers.postgres.connect(target_db)
        else:
            tgt = servers.mariadb.connect()
        config = config_for(tmp_path, servers, task_id=unique_name, source="postgres", source_db=unique_name,
                            tables=[f"{ns}.t"], target=kind, target_db=target_db,
                            pipeline={"startup_mode": "latest", **pipeline})
        rt = TaskRuntime(config)
        rt.sink.ensure_table(rt.source.describe(config.source.table_ids[0]))
        sync(rt, until_caught_up=True)  # the checkpoint: everything after it is read
        try:
            yield rt, src, tgt, ns, f'"{ns}".t' if kind == "postgres" else f"`{ns}`.t"
        finally:
            rt.close()
            if kind == "mysql":
                with tgt.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS `{ns}`")
            tgt.close()


@pytest.fixture(params=["postgres", "mysql"])
def task(request, servers, unique_name, tmp_path):
    # One sync's transactions share a batch: the reader never keeps them waiting a minute.
    with key_move_task(servers, unique_name, tmp_path, request.param,
                       {"checkpoint_interval_secs": 600, "max_batch_delay_ms": 60_000}) as made:
        yield made


def run(conn, *transactions: str) -> None:
    run_transactions(conn, transactions)


def assert_same(task) -> None:
    _, src, tgt, ns, target_table = task
    want, got = fetch_rows(src, f"{ns}.t", "id"), fetch_rows(tgt, target_table, "id")
    # (key, length of doc, n) first: a readable difference, not two 80 KB strings
    assert [(r[0], len(r[1] or ""), r[2]) for r in got] == [(r[0], len(r[1] or ""), r[2]) for r in want]
    assert got == want


def test_key_change_keeps_the_unchanged_toast_value(task):
    rt, src, tgt, ns, target_table = task
    run(src, f"INSERT INTO {ns}.t VALUES (1, '{BIG}', 0)")
    sync(rt, until_caught_up=True)
    run(src, f"UPDATE {ns}.t SET id = 2 WHERE id = 1")  # doc unchanged: the new image has no value for it

    sync(rt, until_caught_up=True)

    assert fetch_rows(src, f"{ns}.t", "id")[0][:2] == (2, BIG)
    assert_same(task)


def test_key_changes_in_one_batch_equal_applying_them_one_by_one(task):
    rt, src, tgt, ns, target_table = task
    run(src, f"INSERT INTO {ns}.t VALUES (10, '{BIG}', 0), (20, '{BIG}2', 0), (21, 'small', 0), "
             f"(30, '{BIG}3', 0), (40, '{BIG}4', 0), (50, '{BIG}5', 0)")
    sync(rt, until_caught_up=True)
    run(src,
        f"INSERT INTO {ns}.t VALUES (1, '{BIG}1', 0)",  # inserted earlier in the batch, then moved
        f"UPDATE {ns}.t SET id = 2 WHERE id = 1",
        f"DELETE FROM {ns}.t WHERE id = 21; UPDATE {ns}.t SET id = 21 WHERE id = 20",  # new key deleted first
        f"UPDATE {ns}.t SET id = 31 WHERE id = 30", f"UPDATE {ns}.t SET id = 32, n = 1 WHERE id = 31",  # a chain
        f"UPDATE {ns}.t SET n = 7 WHERE id = 32",  # a later change to the new key
        f"UPDATE {ns}.t SET id = 99 WHERE id = 40; UPDATE {ns}.t SET id = 40 WHERE id = 50; "
        f"UPDATE {ns}.t SET id = 50 WHERE id = 99",  # a swap through a third key
        f"UPDATE {ns}.t SET id = 11 WHERE id = 10; INSERT INTO {ns}.t VALUES (10, 'again', 3)")  # old key reused

    report = sync(rt, until_caught_up=True)

    assert report.batches == 1
    assert [r[0] for r in fetch_rows(src, f"{ns}.t", "id")] == [2, 10, 11, 21, 32, 40, 50]
    assert_same(task)


def test_a_move_whose_rows_the_target_lacks_stops_naming_table_and_position(task):
    rt, src, tgt, ns, target_table = task
    run(src, f"INSERT INTO {ns}.t VALUES (1, '{BIG}', 0)")
    sync(rt, until_caught_up=True)
    with tgt.cursor() as cur:  # the target lost the row (or was never given it)
        cur.execute(f"DELETE FROM {target_table}")
    checkpoint = rt.resumer.checkpoint().position
    run(src, f"UPDATE {ns}.t SET id = 2 WHERE id = 1")

    with pytest.raises(MoveIncomplete, match=rf"{ns}\.t.*\(1,\) to \(2,\).*doc.*plan --replan") as err:
        sync(rt, until_caught_up=True)

    assert "REPLICA IDENTITY FULL" in str(err.value)
    assert rt.resumer.checkpoint().position == checkpoint  # nothing applied, nothing skipped


def put_source_rows_in_target(task) -> None:
    """The target as a run that committed the changes but not their checkpoint left it (killed in between), or as
    a snapshot read after them: the log replays them over their own result."""
    _, src, tgt, ns, target_table = task
    rows = fetch_rows(src, f"{ns}.t", "id")
    with tgt.cursor() as cur:
        cur.execute(f"DELETE FROM {target_table}")
        for row in rows:
            cur.execute(f"INSERT INTO {target_table} VALUES (%s, %s, %s)", row)


# (statements giving the rows at the checkpoint, transactions replayed over their own result)
REPLAYED = {
    "old key re-inserted in the same transaction": (
        [f"INSERT INTO {{ns}}.t VALUES (1, '{BIG}', 0)"],
        [f"UPDATE {{ns}}.t SET id = 100 WHERE id = 1; INSERT INTO {{ns}}.t VALUES (1, '{BIG}new', 5)"]),
    "old key re-inserted in a later transaction": (
        [f"INSERT INTO {{ns}}.t VALUES (1, '{BIG}', 0)"],
        ["UPDATE {ns}.t SET id = 100 WHERE id = 1", f"INSERT INTO {{ns}}.t VALUES (1, '{BIG}new', 5)"]),
    "a chain into the old key": (
        [f"INSERT INTO {{ns}}.t VALUES (1, '{BIG}', 0), (2, '{BIG}2', 0)"],
        ["UPDATE {ns}.t SET id = 100 WHERE id = 1; UPDATE {ns}.t SET id = 1 WHERE id = 2"]),
    "the moved row updated later": (
        [f"INSERT INTO {{ns}}.t VALUES (1, '{BIG}', 0)"],
        [f"UPDATE {{ns}}.t SET id = 100 WHERE id = 1; INSERT INTO {{ns}}.t VALUES (1, '{BIG}new', 5)",
         "UPDATE {ns}.t SET n = 9 WHERE id = 100"]),
}


@pytest.mark.parametrize("scenario", list(REPLAYED))
def test_a_replayed_move_takes_its_own_unchanged_toast_value(task, scenario):
    rt, src, tgt, ns, target_table = task
    seed, transactions = REPLAYED[scenario]
    run(src, *[s.format(ns=ns) for s in seed])
    sync(rt, until_caught_up=True)
    run(src, *[t.format(ns=ns) for t in transactions])
    put_source_rows_in_target(task)

    sync(rt, until_caught_up=True)

    assert_same(task)


def test_a_move_that_frees_its_new_key_and_refills_its_old_one_in_one_batch_ends_right(task):
    """On a first run the target holds the batch start: the row under the old key is the moved one."""
    rt, src, tgt, ns, target_table = task
    run(src, f"INSERT INTO {ns}.t VALUES (1, '{BIG}', 0), (100, 'gone', 0)")
    sync(rt, until_caught_up=True)
    run(src, f"DELETE FROM {ns}.t WHERE id = 100; UPDATE {ns}.t SET id = 100 WHERE id = 1; "
             f"INSERT INTO {ns}.t VALUES (1, 'new', 5)")

    sync(rt, until_caught_up=True)

    assert_same(task)


@pytest.fixture(params=["postgres", "mysql"])
def snapshot_task(request, servers, unique_name, tmp_path, spark):
    """(make(transactions) -> runtime whose snapshot ran `transactions` right after its low watermark, source
    connection, target connection, namespace, target table); the log then replays them over the snapshot."""
    ns, kind = unique_name, request.param
    target_db = f"{unique_name}_tgt"
    seed = [f"CREATE SCHEMA {ns}", f"CREATE TABLE {ns}.t (id INT PRIMARY KEY, doc TEXT, n INT)",
            f"INSERT INTO {ns}.t VALUES (1, '{BIG}', 0), (100, 'gone', 0)"]
    runtimes = []
    with source_database(servers, "postgres", unique_name, seed) as src:
        if kind == "postgres":
            servers.postgres.create_database(target_db)
            tgt = servers.postgres.connect(target_db)
        else:
            tgt = servers.mariadb.connect()

        def make(transactions: list[str], pipeline: dict | None = None) -> TaskRuntime:
            def during_the_read(ids: list[str]) -> None:
                if transactions:  # once: the table is one split
                    run(src, *[t.format(ns=ns) for t in transactions])
                    transactions.clear()

            config = config_for(tmp_path, servers, task_id=unique_name, source="postgres", source_db=unique_name,
                                tables=[f"{ns}.t"], target=kind, target_db=target_db,
                                pipeline={"startup_mode": "initial", "checkpoint_interval_secs": 600,
                                          "max_batch_delay_ms": 60_000, **(pipeline or {})})
            rt = TaskRuntime(config, hooks=PhaseHooks(after_low=during_the_read))
            rt.adopt_spark(spark)
            runtimes.append(rt)
            snapshot_all(rt)
            return rt

        try:
            yield make, src, tgt, ns, f'"{ns}".t' if kind == "postgres" else f"`{ns}`.t"
        finally:
            for rt in runtimes:
                rt.close()
            if kind == "mysql":
                with tgt.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS `{ns}`")
            tgt.close()


def test_a_move_replayed_over_a_snapshot_holding_the_reinserted_old_key_keeps_its_own_value(snapshot_task):
    make, src, tgt, ns, target_table = snapshot_task
    rt = make([f"UPDATE {{ns}}.t SET id = 200 WHERE id = 1; INSERT INTO {{ns}}.t VALUES (1, '{BIG}new', 5)"])

    sync(rt, until_caught_up=True)

    assert [r[0] for r in fetch_rows(src, f"{ns}.t", "id")] == [1, 100, 200]
    assert_same((rt, src, tgt, ns, target_table))


def test_a_move_over_a_snapshot_that_cannot_tell_its_old_keys_row_stops_naming_table_keys_and_position(
        snapshot_task):
    """The new key freed before the move and the old one filled again after it, while the snapshot read: a
    split may hold the old key's later row, and the batch cannot tell."""
    make, src, tgt, ns, target_table = snapshot_task
    rt = make(["DELETE FROM {ns}.t WHERE id = 100; UPDATE {ns}.t SET id = 100 WHERE id = 1; "
               "INSERT INTO {ns}.t VALUES (1, 'new', 5)"])

    with pytest.raises(MoveIncomplete, match=rf"{ns}\.t.*\(1,\) to \(100,\) at \d+/[0-9A-F]+.*doc.*"
                                             "REPLICA IDENTITY FULL") as err:
        sync(rt, until_caught_up=True)

    assert "plan --replan" in str(err.value)
    assert rt.resumer.checkpoint() is None  # nothing applied, nothing skipped


def test_a_swap_whose_moves_land_in_different_parts_over_a_snapshot_stops_before_committing(snapshot_task):
    """The first part moves key 1 away, copying the target's row under it; a later part fills key 1 again. Over
    a snapshot that read after the swap, the row copied was the later one: the part cannot know that when it copies,
    the later part can, and the transaction stops with nothing of it committed."""
    make, src, tgt, ns, target_table = snapshot_task
    filler = "UPDATE {ns}.t SET n = n + 1 WHERE id = 100"
    rt = make([f"INSERT INTO {{ns}}.t VALUES (2, '{BIG[::-1]}', 0)",
               # parts of 3: (move 1 -> 50, filler, filler), (move 2 -> 1, filler, filler), the end (move 50 -> 2)
               "; ".join(["UPDATE {ns}.t SET id = 50 WHERE id = 1", filler, filler,
                          "UPDATE {ns}.t SET id = 1 WHERE id = 2", filler, filler,
                          "UPDATE {ns}.t SET id = 2 WHERE id = 50"])],
              {"transaction_part_events": 3})

    with pytest.raises(MoveIncomplete, match=rf"{ns}\.t in a transaction handed out in parts.*key \(1,\).*fills that "
                                             "key again.*REPLICA IDENTITY FULL"):
        sync(rt, until_caught_up=True)

    # Nothing of the swap committed: the target holds the keys as the insert before it left them.
    assert [r[0] for r in fetch_rows(tgt, target_table, "id")] == [1, 2, 100]


# The second part must judge its moves by the mark as the transaction found it, not by the one its own first part
# wrote in the same open target transaction (core.batches.MovesAcrossParts).
@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_moves_in_two_parts_of_one_transaction_are_both_applied_the_first_time(servers, unique_name, tmp_path, kind):
    """A transaction handed out in parts moves two rows in different parts: the second part must not take the
    move mark the first part wrote (in the same open target transaction) for a move applied before."""
    with key_move_task(servers, unique_name, tmp_path, kind, {"transaction_part_events": 3}) as made:
        rt, src, _, ns, _ = made
        run(src, f"INSERT INTO {ns}.t VALUES (1, '{BIG}', 0), (2, '{BIG[::-1]}', 0)",
            f"INSERT INTO {ns}.t SELECT g, 'small', 0 FROM generate_series(100, 105) g")
        sync(rt, until_caught_up=True)
        bump = [f"UPDATE {ns}.t SET n = n + 1 WHERE id = {i}" for i in range(100, 106)]
        # parts of 3: (move 1 -> 11, 100, 101), (102, move 2 -> 12, 103), then the end (104, 105)
        run(src, ";".join([f"UPDATE {ns}.t SET id = 11 WHERE id = 1", *bump[:3],  # doc unchanged: a move
                           f"UPDATE {ns}.t SET id = 12 WHERE id = 2", *bump[3:]]))

        sync(rt, until_caught_up=True)

        assert_same(made)


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_a_rotation_of_keys_whose_moves_land_in_different_parts_ends_right(servers, unique_name, tmp_path, kind):
    """Adversary seed 148 (postgres-postgres): 16 -> 43, 3 -> 16 in one part, 43 -> 3 in the next. The second
    part's move goes to a key the first part vacated: its new key must not be taken for the target's own row."""
    with key_move_task(servers, unique_name, tmp_path, kind, {"transaction_part_events": 2}) as made:
        rt, src, _, ns, _ = made
        run(src, f"INSERT INTO {ns}.t VALUES (16, '{BIG}', 0), (3, '{BIG[::-1]}', 0), (5, '{BIG[:70_000]}', 0), "
                 "(100, 'small', 0)")
        sync(rt, until_caught_up=True)
        run(src, ";".join([f"UPDATE {ns}.t SET id = 43 WHERE id = 16", f"UPDATE {ns}.t SET id = 16 WHERE id = 3",
                           f"UPDATE {ns}.t SET id = 3 WHERE id = 43", f"UPDATE {ns}.t SET id = 44 WHERE id = 5",
                           f"UPDATE {ns}.t SET n = n + 1 WHERE id = 100"]))

        sync(rt, until_caught_up=True)

        assert_same(made)


def test_a_first_move_in_a_later_part_into_mariadb_under_a_savepoint_is_applied(servers, unique_name, tmp_path,
                                                                                 monkeypatch):
    """With a savepoint, the target transaction of a transaction in parts reads at its first part (its
    before-images); MariaDB refuses that transaction a table created after it read (1412), so the move marks'
    table a later part's first move needs must be there before."""
    meta = f"{unique_name}_meta"
    monkeypatch.setattr(move_marks, "META", meta)  # a marks table of its own: the shared one exists already
    with key_move_task(servers, unique_name, tmp_path, "mysql", {"transaction_part_events": 3}) as made:
        rt, src, tgt, ns, _ = made
        try:
            run(src, f"INSERT INTO {ns}.t VALUES (1, '{BIG}', 0)",
                f"INSERT INTO {ns}.t SELECT g, 'small', 0 FROM generate_series(100, 105) g")
            sync(rt, until_caught_up=True)
            savepoints.create_on(rt, "before")
            bump = [f"UPDATE {ns}.t SET n = n + 1 WHERE id = {i}" for i in range(100, 106)]
            # parts of 3: (100, 101, 102), (move 1 -> 11, 103, 104), then the end (105)
            run(src, ";".join([*bump[:3], f"UPDATE {ns}.t SET id = 11 WHERE id = 1", *bump[3:]]))

            report = sync(rt, until_caught_up=True)

            assert_same(made)
            assert report.retries == 0  # applied the first time, not after the server asked to retry
        finally:
            with tgt.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{meta}`")
