"""The log-reader contract (cdc_assets/core/boundary.py `LogReader`), written once and run by every source engine's
reader on its real server: whole transactions in commit order, row images, a start that skips what lies before
it, bounded reads that end and report their last boundary, parts of a big transaction, Idle when quiet, close(),
schema changes, lost positions and refused connections.

Each test drives the engine through the registry's `Log` (prepare, reader) and an `Engine` adapter that knows
only how to write rows and take positions there. What an engine does beyond the contract (binlog rotation, XA,
TIME values, TOAST, slots, publications, ...) stays in its own test file."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from cdc_assets.core.events import Idle, Op, SchemaChange, Transaction, TransactionPart
from cdc_assets.core.boundary import Log, LogReader
from cdc_assets.core.positions import MongoPosition, MysqlPosition, PgPosition, Position, is_before
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.dev.processes import free_port
from cdc_assets.engine.registry import SOURCES, source_engine
from cdc_assets.errors import PositionLost, UnreachableError
from cdc_assets.sources.postgres.slot import drop_slot
from cdc_assets_tests.support import mongo

READ_PURPOSE = "contract"  # a reader whose consumer does not acknowledge: these tests look at the log only


@dataclass
class Engine:
    """One source engine as the contract drives it: a fresh database there, rows written in transactions, the
    positions the log is at, and what its log carries that differs by engine."""

    kind: str
    name: str
    url: DbUrl
    conn: object
    source: object  # the engine's snapshot source: describe(), current_position()
    log: Log
    namespace: str
    # The log end right after a commit is exactly its transaction's end (MySQL: nothing else writes the binlog;
    # PostgreSQL writes other WAL records, so a commit's end may lie before the WAL position read after it).
    commit_is_log_end: bool
    # A change is positioned at its transaction's commit end (PostgreSQL makes changes visible at the commit),
    # not at its own event's end (binlog rows events).
    changes_at_commit: bool
    # The old image of a change, given the old row and the key columns: what this engine's log carries.
    before_image: Callable[[Op, dict, list[str], bool], dict | None]
    # (start, stop_at, what the PositionLost message says) of a position the log no longer has.
    lose_position: Callable[["Engine"], tuple[Position, Position, str]]
    # What differs for a document store (MongoDB), identity for SQL engines: a change's row key for the SQL key
    # values of a table, and a change's image with its columns named as the SQL table names them.
    key: Callable[[str, tuple], tuple] = lambda table, values: values
    row: Callable[[dict | None], dict | None] = lambda image: image
    key_updates: bool = True  # a key can change in place (MongoDB's `_id` cannot: a delete and an insert)
    # A part is handed out as soon as it is full (a binlog/WAL reader), or once the next change shows the
    # transaction goes on (a change stream cannot tell a transaction's last event: the last part is its end).
    eager_parts: bool = True
    # Statements that change the schema of `a` and of `other`, and a word the SchemaChange's statement holds.
    schema_change: tuple[tuple[str, ...], str] = (("ALTER TABLE a ADD COLUMN z INT", "ALTER TABLE other ADD COLUMN z INT"),
                                                  "z")

    def table(self, name: str) -> TableId:
        return TableId(self.namespace, name)

    def position(self) -> Position:
        return self.source.current_position()

    def execute(self, *statements: str) -> Position:
        with self.conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
        return self.position()

    def commit(self, *statements: str) -> Position:
        """Run the statements in one transaction; the log position right after it."""
        return self.execute("BEGIN", *statements, "COMMIT")

    def capture(self, *tables: str) -> Position:
        """Make the log keep the changes of `tables` from now on; the position readers start from."""
        prepared = self.log.prepare([self.table(t) for t in tables])
        return prepared if prepared is not None else self.position()

    def reader(self, *tables: str) -> LogReader:
        return self.log.reader({self.table(t): self.source.describe(self.table(t)) for t in tables}, READ_PURPOSE)


def _mysql_before(op: Op, old: dict, key: list[str], key_moved: bool) -> dict:
    return old  # binlog_row_image FULL: the whole old row


def _postgres_before(op: Op, old: dict, key: list[str], key_moved: bool) -> dict | None:
    # REPLICA IDENTITY DEFAULT: the old key for a delete or a key change, nothing for another update.
    return {k: old[k] for k in key} if op is Op.DELETE or key_moved else None


def _lose_binlog(db: Engine) -> tuple[Position, Position, str]:
    gone = MysqlPosition("mysql-bin.999999", 4)
    return gone, MysqlPosition(gone.file, gone.pos + 1), "mysql-bin.999999:4 was purged"


def _lose_slot(db: Engine) -> tuple[Position, Position, str]:
    start = db.capture("a")
    stop = db.commit("INSERT INTO a VALUES (1, 'one')")
    drop_slot(db.conn, db.log.slot)
    return start, stop, f"replication slot {db.log.slot} does not exist"


@pytest.fixture(params=["mysql", "postgres", pytest.param("mongo", marks=mongo)])
def kind(request) -> str:
    if request.param not in SOURCES:  # with CDC_TEST_MONGO_URL set: the `mongo` mark let it through
        pytest.skip(f"Mongo reader not wired into the Log protocol yet: no {request.param!r} entry in "
                    "engine/registry.py's SOURCES")
    return request.param


def _mysql(servers, name: str) -> Engine:
    servers.mariadb.create_database(name)
    url = DbUrl.parse(servers.mariadb.url())
    engine = source_engine("mysql")
    return Engine("mysql", name, url, servers.mariadb.connect(name), engine.snapshot(url), engine.log(url, name),
                  namespace=name, commit_is_log_end=True, changes_at_commit=False, before_image=_mysql_before,
                  lose_position=_lose_binlog)


def _postgres(servers, name: str) -> Engine:
    servers.postgres.create_database(name)
    url = DbUrl.parse(servers.postgres.url(name))
    engine = source_engine("postgres")
    return Engine("postgres", name, url, servers.postgres.connect(name), engine.snapshot(url),
                  engine.log(url, name), namespace="public", commit_is_log_end=False,
                  changes_at_commit=True, before_image=_postgres_before, lose_position=_lose_slot)


def _lose_oplog(db: Engine) -> tuple[Position, Position, str]:
    # A high-water-mark token (the docs' getMore one) moved to cluster time 1.1, long before any oplog's start.
    gone = MongoPosition("8200000001000000012B0429296E1404", (1, 1))
    stop = MongoPosition("8200000002000000012B0429296E1404", (2, 1))
    return gone, stop, f"cannot resume from {gone}"


def _mongo(servers, name: str) -> Engine:
    from pymongo import MongoClient

    from cdc_assets_tests.mongo_statements import MongoStatements
    from cdc_assets_tests.support import MONGO_URL

    url = DbUrl.parse(MONGO_URL)
    engine = source_engine("mongo")
    source = engine.snapshot(url)
    conn = MongoStatements(MongoClient(MONGO_URL), name, source.specs.__setitem__)
    return Engine("mongo", name, url, conn, source, engine.log(url, name), namespace=name,
                  commit_is_log_end=False, changes_at_commit=False, before_image=lambda *_: None,
                  lose_position=_lose_oplog, key=conn.key,
                  row=lambda image: None if image is None else {("id" if k == "_id" else k): v
                                                                for k, v in image.items()},
                  key_updates=False, eager_parts=False, schema_change=(("DROP TABLE a", "DROP TABLE other"), "drop"))


ENGINES: dict[str, Callable[..., Engine]] = {"mysql": _mysql, "postgres": _postgres, "mongo": _mongo}


def _drop(servers, db: Engine) -> None:
    """The test's database; with PostgreSQL the task's slot first (a database holding a slot cannot be dropped)."""
    if db.kind == "mysql":
        with db.conn.cursor() as cur:
            cur.execute(f"DROP DATABASE `{db.name}`")
        db.conn.close()
        return
    if db.kind == "mongo":
        db.conn.client.drop_database(db.name)
        db.conn.client.close()
        return
    drop_slot(db.conn, db.log.slot)
    db.conn.close()
    admin = servers.postgres.connect()
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE "{db.name}" WITH (FORCE)')
    admin.close()


@pytest.fixture
def db(kind, servers, unique_name):
    if kind not in ENGINES:
        pytest.fail(f"{kind} is in the registry but has no contract adapter here: write one beside _mysql")
    engine = ENGINES[kind](servers, unique_name)
    try:
        yield engine
    finally:
        engine.source.close()
        _drop(servers, engine)


def transactions(items) -> list[Transaction]:
    return [item for item in items if isinstance(item, Transaction)]


def position_of(item) -> Position:
    return item.end if isinstance(item, Transaction) else item.floor if isinstance(item, TransactionPart) \
        else item.position


def assert_ends_at(db: Engine, ends: list[Position], windows: list[tuple[Position, Position]]) -> None:
    """Each end lies in its window (after the log position before its commit, at or before the one after), and
    is exactly the latter where the engine's log end after a commit is its end."""
    assert all(is_before(low, end) and not is_before(high, end) for end, (low, high) in zip(ends, windows)), \
        (ends, windows)
    assert len(ends) == len(windows)
    if db.commit_is_log_end:
        assert ends == [high for _, high in windows]


def test_transactions_come_back_whole_in_commit_order(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(10))",
               "CREATE TABLE b (k1 INT, k2 VARCHAR(5), n INT, PRIMARY KEY (k2, k1))",
               "CREATE TABLE other (id INT PRIMARY KEY)")
    start = db.capture("a", "b", "other")  # `other` is kept by the log but not read: the reader drops it
    end1 = db.commit("INSERT INTO a VALUES (1, 'one'), (2, 'two')", "INSERT INTO b VALUES (7, 'k', 70)")
    end2 = db.commit("UPDATE a SET v = 'uno' WHERE id = 1", "DELETE FROM b", "INSERT INTO other VALUES (1)")
    end3 = db.commit("INSERT INTO other VALUES (2)")  # nothing captured: not yielded
    end4 = db.commit("INSERT INTO b VALUES (8, 'm', 80)", "DELETE FROM a WHERE id = 2")

    items = list(db.reader("a", "b").read(start, stop_at=end4))

    assert [i for i in items if not isinstance(i, (Transaction, Idle))] == []
    txns = transactions(items)
    if db.commit_is_log_end:
        assert items == txns  # the last one ends at stop_at: no boundary left to report
    a, b = db.table("a"), db.table("b")
    assert [[(c.table, c.op, c.key) for c in t.changes] for t in txns] == [
        [(a, Op.INSERT, (1,)), (a, Op.INSERT, (2,)), (b, Op.INSERT, db.key("b", ("k", 7)))],  # primary-key order
        [(a, Op.UPDATE, (1,)), (b, Op.DELETE, db.key("b", ("k", 7)))],
        [(b, Op.INSERT, db.key("b", ("m", 8))), (a, Op.DELETE, (2,))],
    ]
    assert_ends_at(db, [t.end for t in txns], [(start, end1), (end1, end2), (end3, end4)])
    # Changes lie in their transaction, in log order: rows of one event share a position.
    positions = [start] + [p for t in txns for p in [c.position for c in t.changes] + [t.end]]
    assert all(not is_before(y, x) for x, y in zip(positions, positions[1:]))
    if db.changes_at_commit:
        assert all(c.position == t.end for t in txns for c in t.changes)
    assert all(t.xid and t.commit_time and abs(t.commit_time - time.time()) < 60 for t in txns)


def test_changes_carry_new_and_old_images(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(10))")
    start = db.capture("a")
    db.commit("INSERT INTO a VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    stop = db.commit("UPDATE a SET v = 'uno' WHERE id = 1", "UPDATE a SET id = 20 WHERE id = 2",
                     "DELETE FROM a WHERE id = 3")

    inserted, changed = transactions(db.reader("a").read(start, stop_at=stop))

    assert [(c.op, c.key, db.row(c.after), db.row(c.before)) for c in inserted.changes] == [
        (Op.INSERT, (1,), {"id": 1, "v": "one"}, None), (Op.INSERT, (2,), {"id": 2, "v": "two"}, None),
        (Op.INSERT, (3,), {"id": 3, "v": "three"}, None)]
    key = ["id"]
    moved = [(Op.UPDATE, (20,), {"id": 20, "v": "two"}, db.before_image(Op.UPDATE, {"id": 2, "v": "two"}, key, True))]
    if not db.key_updates:  # the key changed as a delete of the old key and an insert of the new
        moved = [(Op.DELETE, (2,), None, db.before_image(Op.DELETE, {"id": 2, "v": "two"}, key, False)),
                 (Op.INSERT, (20,), {"id": 20, "v": "two"}, None)]
    assert [(c.op, c.key, db.row(c.after), db.row(c.before)) for c in changed.changes] == [
        (Op.UPDATE, (1,), {"id": 1, "v": "uno"}, db.before_image(Op.UPDATE, {"id": 1, "v": "one"}, key, False)),
        *moved,
        (Op.DELETE, (3,), None, db.before_image(Op.DELETE, {"id": 3, "v": "three"}, key, False))]
    if db.key_updates:
        assert changed.changes[1].before["id"] == 2  # a key change names the old key: the sink deletes that row
        assert changed.changes[2].before["id"] == 3


def test_reading_from_a_transaction_end_yields_only_later_transactions(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    db.capture("a")
    end1 = db.commit("INSERT INTO a VALUES (1)")
    end2 = db.commit("INSERT INTO a VALUES (2)")
    end3 = db.commit("INSERT INTO a VALUES (3)")

    txns = transactions(db.reader("a").read(end1, stop_at=end3))

    assert [[c.key for c in t.changes] for t in txns] == [[(2,)], [(3,)]]
    assert_ends_at(db, [t.end for t in txns], [(end1, end2), (end2, end3)])


def test_stop_at_ends_a_bounded_read_after_the_transaction_reaching_it(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    start = db.capture("a")
    ends = [db.commit(f"INSERT INTO a VALUES ({i})") for i in range(1, 6)]

    items = list(db.reader("a").read(start, stop_at=ends[2]))

    assert [[c.key for c in t.changes] for t in transactions(items)] == [[(1,)], [(2,)], [(3,)]]
    positions = [start] + [position_of(i) for i in items]
    assert all(is_before(x, y) for x, y in zip(positions, positions[1:]))  # an Idle only for a later boundary
    assert is_before(ends[1], positions[-1]) and not is_before(ends[2], positions[-1])
    if db.commit_is_log_end:
        assert positions[1:] == ends[:3]  # nothing after the last transaction: no Idle


def test_bounded_read_ends_when_no_captured_change_reaches_stop_at(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)", "CREATE TABLE other (id INT PRIMARY KEY)")
    start = db.capture("a")
    end1 = db.commit("INSERT INTO a VALUES (1)")
    stop = db.commit("INSERT INTO other VALUES (1)")

    began = time.monotonic()
    items = list(db.reader("a").read(start, stop_at=stop))

    assert time.monotonic() - began < 5
    txns = transactions(items)
    assert [[c.key for c in t.changes] for t in txns] == [[(1,)]]
    assert_ends_at(db, [txns[0].end], [(start, end1)])
    last = items[-1]  # the read reached stop_at past every transaction: it says so before returning
    assert isinstance(last, Idle) and not is_before(last.position, stop)
    if db.commit_is_log_end:
        assert last == Idle(stop)


def test_transaction_of_more_than_part_events_comes_in_parts_then_the_rest(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    start = db.capture("a")
    values = lambda first, last: ", ".join(f"({i})" for i in range(first, last + 1))  # noqa: E731
    small = db.commit(f"INSERT INTO a VALUES {values(1, 2)}")
    big = db.commit(f"INSERT INTO a VALUES {values(11, 17)}")
    whole_parts = db.commit(f"INSERT INTO a VALUES {values(21, 26)}")

    items = [i for i in db.reader("a").read(start, stop_at=whole_parts, part_events=3) if not isinstance(i, Idle)]

    last = [("TransactionPart", [24, 25, 26]),
            ("Transaction", [])]  # every change went out in parts: the end that commits them still comes
    if not db.eager_parts:
        last = [("Transaction", [24, 25, 26])]
    assert [(type(i).__name__, [c.key[0] for c in i.changes]) for i in items] == [
        ("Transaction", [1, 2]),
        ("TransactionPart", [11, 12, 13]), ("TransactionPart", [14, 15, 16]), ("Transaction", [17]),
        ("TransactionPart", [21, 22, 23]), *last,
    ]
    assert_ends_at(db, [t.end for t in transactions(items)], [(start, small), (small, big), (big, whole_parts)])
    # A part's floor lies inside its transaction: at or after the previous end, strictly before its own end.
    parts = [(0, 1, 3), (0, 2, 3), (3, 4, 6), (3, 5, 6)] if db.eager_parts else [(0, 1, 3), (0, 2, 3), (3, 4, 5)]
    for previous, part, end in parts:
        floor = items[part].floor
        assert not is_before(floor, items[previous].end) and is_before(floor, items[end].end)


def test_quiet_log_yields_idle_then_new_transactions_until_closed(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    start = db.capture("a")
    reader = db.reader("a")
    items = reader.read(start)

    began = time.monotonic()
    assert isinstance(next(items), Idle)
    assert 0.9 < time.monotonic() - began < 3  # about a second of quiet
    end = db.commit("INSERT INTO a VALUES (1)")
    began = time.monotonic()
    item = next(items)
    while isinstance(item, Idle) and time.monotonic() - began < 2:
        item = next(items)
    assert isinstance(item, Transaction) and time.monotonic() - began < 2
    assert [c.key for c in item.changes] == [(1,)]
    assert_ends_at(db, [item.end], [(start, end)])
    reader.close()
    assert all(isinstance(i, Idle) for i in items)  # the stream ends


def test_close_from_another_thread_ends_a_blocking_read(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    start = db.capture("a")
    reader = db.reader("a")
    closer = threading.Timer(1.5, reader.close)

    began = time.monotonic()
    closer.start()
    try:
        items = list(reader.read(start))  # nothing to read: blocks until closed
    finally:
        closer.cancel()

    assert 1.5 <= time.monotonic() - began < 4.5
    assert items and all(isinstance(i, Idle) for i in items)


def test_schema_change_of_a_captured_table_comes_before_the_changes_read_with_it(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)", "CREATE TABLE other (id INT PRIMARY KEY)")
    start = db.capture("a")
    reader = db.reader("a")  # the schema as of the start, as a checkpoint records it
    statements, word = db.schema_change
    db.execute(*statements)
    stop = db.commit("INSERT INTO a VALUES (1, 5)", "INSERT INTO other VALUES (1, 5)")

    items = [i for i in reader.read(start, stop_at=stop) if not isinstance(i, Idle)]

    assert [type(i) for i in items] == [SchemaChange, Transaction]  # nothing for the uncaptured table
    change, txn = items
    assert change.table == db.table("a") and word in change.statement
    assert not is_before(change.position, start) and is_before(change.position, txn.end)
    # The described columns are exact. The added one is the engine's to take up after the SchemaChange (it re-reads
    # with the new schema): the binlog reader drops columns its schema lacks, pgoutput's Relation already names it.
    [after] = [db.row(c.after) for c in txn.changes]
    assert after["id"] == 1 and after.get("z", 5) == 5 and set(after) <= {"id", "z"}


def test_lost_position_raises_position_lost_with_the_way_out(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(10))")
    start, stop, says = db.lose_position(db)

    with pytest.raises(PositionLost) as caught:
        list(db.reader("a").read(start, stop_at=stop))

    assert says in caught.value.message and str(db.url) in caught.value.message
    assert "cdc-assets plan --replan" in caught.value.hint
    assert not db.url.password or db.url.render(masked=False) not in str(caught.value)  # named, masked


REFUSED = {  # a source nobody listens at, and two positions to read between there
    "mysql": ("mysql://cdc:s3cret-pw@127.0.0.1:{port}", MysqlPosition("mysql-bin.000001", 4),
              MysqlPosition("mysql-bin.000001", 5)),
    "postgres": ("postgresql://cdc:s3cret-pw@127.0.0.1:{port}/shop", PgPosition(1), PgPosition(2)),
    "mongo": ("mongodb://cdc:s3cret-pw@127.0.0.1:{port}/?directConnection=true",
              MongoPosition("8200000001000000012B0429296E1404", (1, 1)),
              MongoPosition("8200000002000000012B0429296E1404", (2, 1))),
}


def test_refused_connection_is_unreachable_with_a_masked_url(kind):
    raw, start, stop = REFUSED[kind]
    url = DbUrl.parse(raw.format(port=free_port()))
    reader = source_engine(kind).log(url, "refused").reader({}, READ_PURPOSE)

    with pytest.raises(UnreachableError) as caught:
        list(reader.read(start, stop_at=stop))

    assert "cdc:***@127.0.0.1" in str(caught.value) and "s3cret" not in str(caught.value)
