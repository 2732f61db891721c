"""The binlog reader on the private MariaDB, beyond the log-reader contract every reader passes
(test_log_reader_contract.py): values as a SELECT reads them, TIME and zero dates, rotations, DDL statements,
missing column names, positions inside an event, and the timestamp startup search."""
from __future__ import annotations

import random
import time
from dataclasses import dataclass

import pymysql
import pytest

from cdc_assets.core.events import Idle, SchemaChange, SchemaChangeKind, Transaction
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import PositionLost, SourceSetupError
from cdc_assets.sources.mysql.binlog import BinlogReader
from cdc_assets.sources.mysql.stream import default_server_id
from cdc_assets.sources.mysql.timestamps import find_position_at
from cdc_assets.sources.mysql.zero_dates import ZeroDateError
from cdc_assets.sources.mysql.source import MysqlSource


@dataclass
class Capture:
    """One test database on the shared MariaDB, with what a test needs to write and read its binlog."""

    name: str
    url: DbUrl
    conn: pymysql.connections.Connection
    source: MysqlSource

    def position(self) -> MysqlPosition:
        return self.source.current_position()

    def commit(self, *statements: str) -> MysqlPosition:
        """Run the statements in one transaction; the log end right after it (nothing else writes meanwhile)."""
        with self.conn.cursor() as cur:
            cur.execute("BEGIN")
            for statement in statements:
                cur.execute(statement)
            cur.execute("COMMIT")
        return self.position()

    def execute(self, statement: str, args=None) -> MysqlPosition:
        with self.conn.cursor() as cur:
            cur.execute(statement, args)
        return self.position()

    def table(self, name: str) -> TableId:
        return TableId(self.name, name)

    def reader(self, *tables: str) -> BinlogReader:
        schemas = {self.table(t): self.source.describe(self.table(t)) for t in tables}
        return BinlogReader(self.url, default_server_id(self.name), schemas)


@pytest.fixture
def db(servers, unique_name):
    servers.mariadb.create_database(unique_name)
    url = DbUrl.parse(servers.mariadb.url())
    capture = Capture(unique_name, url, servers.mariadb.connect(unique_name), MysqlSource(url))
    try:
        yield capture
    finally:
        capture.execute(f"DROP DATABASE `{unique_name}`")
        capture.source.close()
        capture.conn.close()


def transactions(items) -> list[Transaction]:
    return [item for item in items if isinstance(item, Transaction)]


TYPES_DDL = """CREATE TABLE types_t (
  id INT PRIMARY KEY, i INT, u BIGINT UNSIGNED, d DECIMAL(65,30), v VARCHAR(20), e_s VARCHAR(5), b BLOB,
  bn BINARY(4), dt DATETIME(6), ts TIMESTAMP(6) NULL, da DATE, ti TIME, t6 TIME(6), y YEAR, j JSON,
  en ENUM('a','b'), st SET('x','y','z'), bt BIT(10), f FLOAT, db DOUBLE, uu UUID)"""
ROWS = [
    "(1, -2147483648, 18446744073709551615, -12345678901234567890123456789012345.123456789012345678901234567890,"
    " 'hi 😀', '', x'ff00', 'a', '2024-02-29 23:59:59.123456', '2038-01-19 03:14:07.999999', '9999-12-31',"
    " '-838:59:59', '-00:00:01.500000', 2155, '{\"a\": [1, 2.5, \"é\"]}', 'b', 'z,x', b'0000000101', 3.14,"
    " 2.718281828459045, '123e4567-e89b-12d3-a456-426614174000')",
    "(2, 0, 0, 0, '', '', '', x'00000000', '1000-01-01 00:00:00', '1970-01-01 00:00:01', '1000-01-01', '00:00:00',"
    " '838:59:59.000000', 1901, '[]', 'a', '', b'0', -3.40282e38, -1.7976931348623157e308,"
    " '00000000-0000-0000-0000-000000000001')",
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL)",
]
# What a plain SELECT returns, except: BIT travels as the snapshot renders it (padded bit string, pymysql would
# give bytes), FLOAT as the exact single-precision value the snapshot reads as DOUBLE (pymysql would give
# the 6-digit rendering 3.14), and TIME as the snapshot's text (pymysql would give a timedelta).
SELECT_AS_SNAPSHOT = ("SELECT id, i, u, d, v, e_s, b, bn, dt, ts, da, CAST(ti AS CHAR) AS ti, CAST(t6 AS CHAR) AS t6, y,"
                      " j, en, st, LPAD(BIN(bt), 10, '0') AS bt, CAST(f AS DOUBLE) AS f, db, uu FROM types_t ORDER BY id")


def selected(db: Capture) -> list[dict]:
    with db.conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(SELECT_AS_SNAPSHOT)
        return cur.fetchall()


def test_values_equal_what_select_reads(db):
    db.execute(TYPES_DDL)
    start = db.position()
    db.commit(f"INSERT INTO types_t VALUES {', '.join(ROWS)}")
    expected = selected(db)
    stop = db.commit("DELETE FROM types_t")

    inserted, deleted = transactions(db.reader("types_t").read(start, stop_at=stop))

    assert [c.after for c in inserted.changes] == expected
    assert [c.before for c in deleted.changes] == expected
    assert [[type(v) for v in c.after.values()] for c in inserted.changes] == [
        [type(v) for v in row.values()] for row in expected]  # b'' is not '', Decimal is not float


def random_times(rng: random.Random, precision: int, count: int) -> list[str]:
    """TIME(precision) literals, mostly negative with a fraction; the range ends at 838:59:59."""
    out = []
    for _ in range(count):
        hours = rng.choice([0, 0, 1, rng.randrange(838), 838])
        seconds = rng.randrange(59 if hours == 838 else 60)
        fraction = rng.randrange(1, 10 ** precision) if rng.random() < 0.9 else 0
        sign = "-" if rng.random() < 0.8 else ""
        out.append(f"{sign}{hours}:{rng.randrange(60):02}:{seconds:02}.{fraction:0{precision}}")
    return out


def test_negative_fractional_times_equal_the_servers_text(db):
    rng = random.Random(7)
    db.execute("CREATE TABLE tt (id INT PRIMARY KEY, t1 TIME(1), t2 TIME(2), t3 TIME(3), t4 TIME(4), t5 TIME(5),"
               " t6 TIME(6))")
    columns = {p: random_times(rng, p, 200) for p in range(1, 7)}
    rows = [f"({i}, {', '.join(repr(columns[p][i]) for p in range(1, 7))})" for i in range(200)]
    start = db.position()
    stop = db.commit(f"INSERT INTO tt VALUES {', '.join(rows)}")
    with db.conn.cursor() as cur:
        cur.execute("SELECT id, " + ", ".join(f"CAST(t{p} AS CHAR)" for p in range(1, 7)) + " FROM tt ORDER BY id")
        # The reader hands TIME on as the server's own text (what the snapshot reads too).
        expected = [{"id": r[0], **{f"t{p}": r[p] for p in range(1, 7)}} for r in cur.fetchall()]

    (txn,) = transactions(db.reader("tt").read(start, stop_at=stop))

    wrong = [(c.after, e) for c, e in zip(txn.changes, expected) if c.after != e]
    assert len(txn.changes) == 200
    assert wrong == []


def test_zero_dates_stop_the_read_naming_table_column_key_and_position(db):
    """A session without NO_ZERO_DATE writes them; no target holds them, and NULL would be another value."""
    db.execute("CREATE TABLE z (id INT PRIMARY KEY, dt DATETIME, ts TIMESTAMP NULL, da DATE, y YEAR)")
    start = db.position()
    db.execute("SET SESSION sql_mode = ''")
    stop = db.commit("INSERT INTO z VALUES (1, '2020-01-01 00:00:00', NULL, '2021-02-00', 0)")

    with pytest.raises(ZeroDateError, match=rf"column da of {db.name}\.z, key \(1,\), at mysql-bin\.\d+:\d+"):
        transactions(db.reader("z").read(start, stop_at=stop))


def test_bounded_read_ends_when_nothing_captured_reaches_stop_at(db):
    """Only other tables change, and the binlog rotates: the read still ends, at the log end, reported as Idle."""
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    db.execute("CREATE TABLE other (id INT PRIMARY KEY)")
    start = db.position()
    db.commit("INSERT INTO other VALUES (1)")
    db.execute("FLUSH BINARY LOGS")
    stop = _after_binlog_checkpoint(db)
    assert stop.file != start.file

    began = time.monotonic()
    items = list(db.reader("a").read(start, stop_at=stop))

    assert time.monotonic() - began < 5
    assert items == [Idle(stop)]


def _after_binlog_checkpoint(db):
    """The log end once MariaDB wrote the new file's own Binlog_checkpoint event: it writes that event when the old
    file's transactions are durable, asynchronously, so a log end read right after a rotation can still move."""
    deadline = time.monotonic() + 30
    while True:
        position = db.position()
        with db.conn.cursor() as cur:
            cur.execute(f"SHOW BINLOG EVENTS IN '{position.file}'")
            if any(row[2] == "Binlog_checkpoint" and position.file in row[5] for row in cur.fetchall()):
                return db.position()
        assert time.monotonic() < deadline, "MariaDB wrote no Binlog_checkpoint for the new binlog"
        time.sleep(0.05)


def test_transactions_across_a_rotation_carry_the_new_file(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    start = db.position()
    end1 = db.commit("INSERT INTO a VALUES (1)")
    db.execute("FLUSH BINARY LOGS")
    end2 = db.commit("INSERT INTO a VALUES (2)")

    items = list(db.reader("a").read(start, stop_at=end2))

    assert [t.end for t in items] == [end1, end2]
    assert end2.file != end1.file and items[1].changes[0].position.file == end2.file


def test_alter_on_a_captured_table_is_a_schema_change_and_on_another_table_nothing(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    db.execute("CREATE TABLE other (id INT PRIMARY KEY)")
    start = db.position()
    after_alter = db.execute("ALTER TABLE a ADD COLUMN z INT")
    stop = db.execute("ALTER TABLE other ADD COLUMN z INT")

    items = list(db.reader("a").read(start, stop_at=stop))

    assert items == [SchemaChange(db.table("a"), "ALTER TABLE a ADD COLUMN z INT", after_alter,
                                  SchemaChangeKind.ADDED_COLUMNS, ("z",)), Idle(stop)]


def test_missing_column_names_ask_for_full_row_metadata(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY, v INT)")
    start = db.position()
    db.execute("SET GLOBAL binlog_row_metadata = MINIMAL")
    try:
        writer = DbUrl.parse(db.url.render(masked=False))
        conn = pymysql.connect(host=writer.host, port=writer.port, user=writer.user, password=writer.password,
                               database=db.name, autocommit=True)  # a new session takes the global setting
        conn.cursor().execute("INSERT INTO a VALUES (1, 2)")
        conn.close()
    finally:
        db.execute("SET GLOBAL binlog_row_metadata = FULL")
    stop = db.position()

    with pytest.raises(SourceSetupError, match="no column names.*binlog_row_metadata=FULL"):
        list(db.reader("a").read(start, stop_at=stop))


def test_position_inside_an_event_is_a_lost_position(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    start = db.position()
    end = db.commit("INSERT INTO a VALUES (1)")
    inside = MysqlPosition(start.file, start.pos + 1)

    with pytest.raises(PositionLost, match=f"from {inside.file}:{inside.pos}"):
        list(db.reader("a").read(inside, stop_at=end))


def test_find_position_at_lands_between_two_transactions(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    end1 = db.commit("INSERT INTO a VALUES (1)")
    time.sleep(1.5)
    moment = time.time()
    time.sleep(1.5)
    end2 = db.commit("INSERT INTO a VALUES (2)")

    found = find_position_at(db.url, moment)

    assert (found.file, found.pos) == (end1.file, end1.pos)
    assert [t.end for t in transactions(db.reader("a").read(found, stop_at=end2))] == [end2]
    assert find_position_at(db.url, time.time() + 60) == end2  # after everything: the log end
