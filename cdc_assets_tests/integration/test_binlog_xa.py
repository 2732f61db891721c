"""XA transactions on the real MariaDB (10.5+ binlogs XA PREPARE as its own event group, and XA COMMIT/ROLLBACK
as another, maybe much later): rows reach the target at XA COMMIT only, never for a rolled-back XA, and a prepared
XA still pending when a run ends is applied by the run that reads its commit."""
import threading
import time

import pymysql
import pytest

from cdc_assets.core.events import Transaction
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import PositionLost
from cdc_assets.sources.mysql.binlog import BinlogReader
from cdc_assets.sources.mysql.source import MysqlSource
from cdc_assets.sources.mysql.stream import default_server_id
from cdc_assets_tests.support import config_for, execute, fetch_rows, postgres_target, source_database

SEED = ["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO t VALUES (1, 'one'), (2, 'two')"]


@pytest.fixture
def task(servers, unique_name, tmp_path):
    """(runtime whose checkpoint is the log end after the seed, connect(), target rows(), source rows())"""
    target = f"{unique_name}_tgt"
    tgt = postgres_target(servers, target)
    with source_database(servers, "mysql", unique_name, SEED) as src:
        config = config_for(tmp_path, servers, task_id="xa", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target="postgres", target_db=target,
                            pipeline={"startup_mode": "latest", "transaction_part_events": 5})
        rt = TaskRuntime(config)
        rt.sink.ensure_table(rt.source.describe(config.source.table_ids[0]))
        with tgt.cursor() as cur:  # what a snapshot would have copied
            cur.execute(f"""INSERT INTO "{unique_name}".t VALUES (1, 'one'), (2, 'two')""")
        sync(rt, until_caught_up=True)
        sessions = []

        def connect():
            conn = servers.mariadb.connect(unique_name)
            sessions.append(conn)
            return conn
        try:
            yield (rt, connect, lambda: fetch_rows(tgt, f'"{unique_name}".t', "id"),
                   lambda: fetch_rows(src, "t", "id"))
        finally:
            for conn in sessions:
                conn.close()
            rt.close()
            _roll_back_left_over(src)
    tgt.close()


def _roll_back_left_over(conn) -> None:
    """A failed test may leave an XA prepared: it outlives its session and would lock DROP DATABASE."""
    with conn.cursor() as cur:
        cur.execute("XA RECOVER FORMAT='SQL'")
        for row in cur.fetchall():
            cur.execute(f"XA ROLLBACK {row[3]}")


def prepare(conn, xid: str, *statements):
    execute(conn, f"XA START {xid}", *statements, f"XA END {xid}", f"XA PREPARE {xid}")


def test_xa_groups_larger_than_a_part_are_held_whole_until_their_outcome(task):
    """Parts of 5 changes: a rolled-back XA of 20 inserts must not leak parts into the next transaction's commit."""
    rt, connect, target_rows, source_rows = task
    a, other = connect(), connect()
    prepare(a, "'big'", *[f"INSERT INTO t VALUES ({100 + i}, 'rolled back')" for i in range(20)])
    execute(other, "INSERT INTO t VALUES (30, 'plain')")
    execute(a, "XA ROLLBACK 'big'")
    prepare(a, "'kept'", *[f"INSERT INTO t VALUES ({200 + i}, 'kept')" for i in range(20)])
    execute(a, "XA COMMIT 'kept'")
    sync(rt, until_caught_up=True)
    assert target_rows() == source_rows() and len(source_rows()) == 23


def test_xa_commit_applies_its_rows_and_xa_rollback_applies_nothing(task):
    rt, connect, target_rows, source_rows = task
    a, b, other = connect(), connect(), connect()
    prepare(a, "'commit-me'", "INSERT INTO t VALUES (10, 'xa')", "UPDATE t SET v = 'xa' WHERE id = 1")
    prepare(b, "'roll','back',7", "INSERT INTO t VALUES (20, 'never')", "DELETE FROM t WHERE id = 2")
    execute(other, "INSERT INTO t VALUES (30, 'plain')")  # commits between the XA PREPAREs and their outcome
    execute(b, "XA ROLLBACK 'roll','back',7")
    execute(a, "XA COMMIT 'commit-me'")
    execute(other, "XA START 'one'", "INSERT INTO t VALUES (40, 'one phase')", "XA END 'one'",
            "XA COMMIT 'one' ONE PHASE")

    sync(rt, until_caught_up=True)

    assert source_rows() == [(1, "xa"), (2, "two"), (10, "xa"), (30, "plain"), (40, "one phase")]
    assert target_rows() == source_rows()


def test_a_pending_xa_waits_for_its_commit_in_a_later_run(task):
    rt, connect, target_rows, source_rows = task
    xa, other = connect(), connect()
    prepare(xa, "'later'", "INSERT INTO t VALUES (10, 'xa')", "UPDATE t SET v = 'xa' WHERE id = 1")
    execute(other, "INSERT INTO t VALUES (30, 'plain')", "FLUSH BINARY LOGS")  # the PREPARE is in an older file
    execute(other, "INSERT INTO t VALUES (31, 'plain')")
    first = sync(rt, until_caught_up=True)

    assert first.events == 2  # the plain inserts; the prepared XA is not committed yet
    assert target_rows() == [(1, "one"), (2, "two"), (30, "plain"), (31, "plain")]

    execute(xa, "XA COMMIT 'later'")
    second = sync(rt, until_caught_up=True)  # starts after the PREPARE: finds its rows back in the log

    assert second.events == 2
    assert target_rows() == source_rows() == [(1, "xa"), (2, "two"), (10, "xa"), (30, "plain"), (31, "plain")]


def test_a_pending_xa_rolled_back_in_a_later_run_applies_nothing(task):
    rt, connect, target_rows, source_rows = task
    xa, other = connect(), connect()
    prepare(xa, "'undo'", "INSERT INTO t VALUES (10, 'xa')")
    execute(other, "INSERT INTO t VALUES (30, 'plain')")
    sync(rt, until_caught_up=True)
    execute(xa, "XA ROLLBACK 'undo'")
    execute(other, "INSERT INTO t VALUES (31, 'plain')")

    sync(rt, until_caught_up=True)

    assert target_rows() == source_rows() == [(1, "one"), (2, "two"), (30, "plain"), (31, "plain")]


def test_a_commit_whose_prepare_was_purged_stops_with_the_way_out(task):
    rt, connect, target_rows, _ = task
    xa, other = connect(), connect()
    prepare(xa, "'lost'", "INSERT INTO t VALUES (10, 'xa')")
    execute(other, "FLUSH BINARY LOGS", "INSERT INTO t VALUES (30, 'plain')")
    sync(rt, until_caught_up=True)
    with other.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        current = cur.fetchone()[0]
        for _ in range(600):  # PURGE skips a file the server still needs: in use by a dump thread that has not
            cur.execute(f"PURGE BINARY LOGS TO '{current}'")  # ended yet, or before InnoDB's binlog checkpoint
            cur.execute("SHOW BINARY LOGS")
            files = [row[0] for row in cur.fetchall()]
            if files == [current]:
                break
            time.sleep(0.05)
        assert files == [current]
    execute(xa, "XA COMMIT 'lost'")

    with pytest.raises(PositionLost) as caught:
        sync(rt, until_caught_up=True)

    assert "XA transaction X'6c6f7374',X'',1" in str(caught.value) and "plan --replan" in caught.value.hint
    assert target_rows() == [(1, "one"), (2, "two"), (30, "plain")]


def test_the_read_back_for_a_prepare_reaches_its_start_when_the_server_ends_the_stream_early(servers, unique_name):
    """KILL QUERY on a dump thread ends its stream with a clean EOF, as at the log end: a read back that took that
    for the end would miss the PREPARE and call a present binlog gone. Every dump thread is killed every 20 ms
    while the read back crosses the 4,000 groups of another table
    that come before the PREPARE."""
    with source_database(servers, "mysql", unique_name, SEED + ["CREATE TABLE f (id INT PRIMARY KEY, v TEXT)"]) as src:
        source = MysqlSource(DbUrl.parse(servers.mariadb.url(unique_name)))
        table = TableId(unique_name, "t")
        reader = BinlogReader(source.url, default_server_id(unique_name), {table: source.describe(table)})
        xa, killer = servers.mariadb.connect(unique_name), servers.mariadb.connect(unique_name)
        try:
            execute(src, "FLUSH BINARY LOGS")
            for i in range(4000):
                execute(src, f"INSERT INTO f VALUES ({i}, REPEAT('x', 8000))")
            prepare(xa, "'early-eof'", "INSERT INTO t VALUES (10, 'xa')")
            start = source.current_position()
            execute(xa, "XA COMMIT 'early-eof'")
            stop = source.current_position()
            kills, done = [], threading.Event()

            def kill_dump_threads():
                with killer.cursor() as cur:
                    while not done.wait(0.02):
                        cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
                        for (thread,) in cur.fetchall():
                            try:
                                cur.execute(f"KILL QUERY {thread}")
                                kills.append(thread)
                            except pymysql.err.MySQLError as exc:  # 1094: it ended meanwhile
                                if exc.args[0] != 1094:
                                    raise
            thread = threading.Thread(target=kill_dump_threads)
            thread.start()
            try:
                items = list(reader.read(start, stop_at=stop))
            finally:
                done.set()
                thread.join()
        finally:
            reader.close()
            source.close()
            xa.close()
            killer.close()

    (txn,) = [item for item in items if isinstance(item, Transaction)]
    assert [(c.op.name, c.after) for c in txn.changes] == [("INSERT", {"id": 10, "v": "xa"})]
    assert len(kills) >= 2
