"""The pgoutput log reader on the private PostgreSQL, beyond the log-reader contract every reader passes
(test_log_reader_contract.py): values as a SELECT reads them, acknowledgements, unchanged TOAST, column changes and
TRUNCATE, invalidated slots, missing publications, slot names, and partitions."""
from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from decimal import Decimal

import pytest

from cdc_assets.core.events import Idle, Op, SchemaChange, SchemaChangeKind, Transaction
from cdc_assets.core.positions import PgPosition
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import PositionLost, TableError
from cdc_assets.sources.postgres.reader import PgLogReader
from cdc_assets.sources.postgres.slot import (drop_publication, drop_slot, ensure_publication, ensure_slot,
                                              publication_name, slot_name, slot_state)
from cdc_assets.sources.postgres.source import PostgresSource


@dataclass
class Capture:
    """One test database on the shared PostgreSQL, with its own slot and publication."""

    name: str
    url: DbUrl
    conn: object
    source: PostgresSource
    slot: str
    publication: str

    def position(self) -> PgPosition:
        return self.source.current_position()

    def execute(self, *statements: str) -> PgPosition:
        with self.conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
        return self.position()

    def commit(self, *statements: str) -> PgPosition:
        """Run the statements in one transaction; the WAL position right after it."""
        return self.execute("BEGIN", *statements, "COMMIT")

    def table(self, name: str) -> TableId:
        return TableId("public", name)

    def capture(self, *tables: str) -> PgPosition:
        """Publish `tables` and create the slot: the start position for readers."""
        ensure_publication(self.conn, self.publication, [self.table(t) for t in tables])
        return ensure_slot(self.conn, self.slot)

    def reader(self, *tables: str, source_text: bool = False) -> PgLogReader:
        """A reader whose consumer does not acknowledge every transaction (these tests read the log, mostly
        without applying it anywhere)."""
        schemas = {self.table(t): self.source.describe(self.table(t)) for t in tables}
        return PgLogReader(self.url, self.slot, self.publication, schemas, acknowledged=False, source_text=source_text)


@pytest.fixture
def db(servers, unique_name):
    servers.postgres.create_database(unique_name)
    url = DbUrl.parse(servers.postgres.url(unique_name))
    capture = Capture(unique_name, url, servers.postgres.connect(unique_name), PostgresSource(url),
                      slot_name(unique_name), publication_name(unique_name))
    try:
        yield capture
    finally:
        drop_slot(capture.conn, capture.slot)
        drop_publication(capture.conn, capture.publication)
        capture.source.close()
        capture.conn.close()
        admin = servers.postgres.connect()
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE "{unique_name}" WITH (FORCE)')
        admin.close()


def transactions(items) -> list[Transaction]:
    return [item for item in items if isinstance(item, Transaction)]


TYPES_DDL = """CREATE TABLE types_t (
  id INT PRIMARY KEY, i INT, bi BIGINT, n NUMERIC(20,6), t TEXT, by BYTEA, ts TIMESTAMP(6), tz TIMESTAMPTZ,
  d DATE, j JSONB, arr INT[], u UUID, b BOOL, iv INTERVAL, r REAL, uus UUID[])"""
ROWS = [
    "(1, -2147483648, 9223372036854775807, -12345678901234.123456, 'hi 😀 é', '\\x00ff'::bytea,"
    " '2024-02-29 23:59:59.123456', '2038-01-19 03:14:07.999999+02', '9999-12-31', '{\"a\": [1, 2.5, \"é\"]}',"
    " '{1,NULL,3}', '123e4567-e89b-12d3-a456-426614174000', true, '1 mon 2 days 03:04:05', 3.14, '{00000000-0000-0000-0000-000000000002}')",
    "(2, 0, 0, 0.000001, '', ''::bytea, '1970-01-01 00:00:00', '1970-01-01 00:00:00+00', '2000-01-01', '[]',"
    " '{}', '00000000-0000-0000-0000-000000000001', false, '0', '-Infinity', '{}')",
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
]
# What a plain SELECT returns, with the reader's choices spelled out: JSON, INTERVAL and UUID[] as text, REAL as the
# exact single-precision value (psycopg2 would give 3.14, the snapshot reads real::float8).
SELECT_AS_READER = ("SELECT id, i, bi, n, t, by, ts, tz, d, j::text AS j, arr, u, b, iv::text AS iv, r::float8 AS r, "
                    "uus::text[] AS uus "
                    "FROM types_t ORDER BY id")


def selected(db: Capture) -> list[dict]:
    with db.conn.cursor() as cur:
        cur.execute(SELECT_AS_READER)
        names = [d.name for d in cur.description]
        return [{k: bytes(v) if isinstance(v, memoryview) else v for k, v in zip(names, row)} for row in cur.fetchall()]


def test_values_equal_what_select_reads(db):
    db.execute(TYPES_DDL)
    start = db.capture("types_t")
    db.commit(f"INSERT INTO types_t VALUES {', '.join(ROWS)}")
    expected = selected(db)
    stop = db.commit("DELETE FROM types_t")

    inserted, deleted = transactions(db.reader("types_t").read(start, stop_at=stop))

    assert [c.after for c in inserted.changes] == expected
    first, second, nulls = (c.after for c in inserted.changes)
    assert first["n"] == Decimal("-12345678901234.123456") and isinstance(first["n"], Decimal)
    assert (first["by"], second["by"]) == (b"\x00\xff", b"")
    assert first["tz"] == datetime(2038, 1, 19, 1, 14, 7, 999999, tzinfo=timezone.utc)
    assert first["ts"].tzinfo is None and first["d"] == date(9999, 12, 31)
    assert (first["j"], first["arr"]) == ('{"a": [1, 2.5, "é"]}', [1, None, 3])
    assert first["u"] == "123e4567-e89b-12d3-a456-426614174000"
    assert (first["r"], first["uus"]) == (3.140000104904175, ["00000000-0000-0000-0000-000000000002"])
    assert (first["iv"], first["t"], first["bi"]) == ("1 mon 2 days 03:04:05", "hi 😀 é", 9223372036854775807)
    assert set(nulls.values()) == {3, None}
    assert [c.before for c in deleted.changes] == [{"id": 1}, {"id": 2}, {"id": 3}]


def test_with_source_text_values_outside_the_key_are_the_servers_text(db):
    """For PostgreSQL targets (Sink.parses_source_text): each value as `column::text` prints it, the key cast."""
    db.execute(TYPES_DDL)
    start = db.capture("types_t")
    db.commit(f"INSERT INTO types_t VALUES {', '.join(ROWS)}")
    with db.conn.cursor() as cur:
        cur.execute("SET TimeZone = 'UTC'")
        cur.execute("SELECT id, i::text, bi::text, n::text, t, by::text, ts::text, tz::text, d::text, j::text, arr::text, "
                    "u::text, CASE b WHEN true THEN 't' WHEN false THEN 'f' END AS b, iv::text, r::text, uus::text "
                    "FROM types_t ORDER BY id")  # bool's output is 't'/'f' ('true' is its cast to text)
        names = [d.name for d in cur.description]
        expected = [dict(zip(names, row)) for row in cur.fetchall()]
    stop = db.commit("UPDATE types_t SET i = 7 WHERE id = 1")
    inserted, updated = transactions(db.reader("types_t", source_text=True).read(start, stop_at=stop))

    assert [{k: (v, want.get(k)) for k, v in c.after.items() if v != want.get(k)}  # (read, selected) per column
            for c, want in zip(inserted.changes, expected)] == [{}, {}, {}]
    assert [c.key for c in inserted.changes] == [(1,), (2,), (3,)]
    assert (updated.changes[0].key, updated.changes[0].after["i"], updated.changes[0].after["b"]) == ((1,), "7", "t")


def test_acknowledged_transactions_are_not_replayed_unacknowledged_ones_are(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    start = db.capture("a")
    db.commit("INSERT INTO a VALUES (1)")
    db.commit("INSERT INTO a VALUES (2)")
    stop = db.commit("INSERT INTO a VALUES (3)")
    reader = db.reader("a")

    def keys_read_from_start(acknowledge_first: bool = False) -> list[tuple]:
        keys = []
        for item in reader.read(start, stop_at=stop):
            if isinstance(item, Transaction):
                keys += [c.key for c in item.changes]
                if acknowledge_first and len(keys) == 1:
                    reader.acknowledge(item.end)  # while streaming: a feedback message
        return keys

    assert keys_read_from_start() == [(1,), (2,), (3,)]
    assert keys_read_from_start() == [(1,), (2,), (3,)]  # nothing acknowledged: all replayed
    assert keys_read_from_start(acknowledge_first=True) == [(1,), (2,), (3,)]
    assert keys_read_from_start() == [(2,), (3,)]  # the server starts at the slot's confirmed position
    reader.acknowledge(stop)  # after the stream ended: by SQL on the released slot
    assert slot_state(db.conn, db.slot).confirmed_flush_lsn == stop
    assert keys_read_from_start() == []


def test_unchanged_toast_column_is_absent_from_after_unless_the_old_row_carries_it(db):
    db.execute("CREATE TABLE big (id INT PRIMARY KEY, doc TEXT, n INT)")
    start = db.capture("big")
    doc = secrets.token_urlsafe(12_000)  # 16 KB of random text: compression cannot keep it inline
    db.commit(f"INSERT INTO big VALUES (1, '{doc}', 0)")
    db.commit("UPDATE big SET n = 1")
    db.commit("ALTER TABLE big REPLICA IDENTITY FULL")
    db.commit("UPDATE big SET n = 2")
    stop = db.commit("UPDATE big SET doc = 'small', n = 3")

    inserted, default_identity, full_identity, doc_changed = transactions(db.reader("big").read(start, stop_at=stop))

    assert inserted.changes[0].after == {"id": 1, "doc": doc, "n": 0}
    assert default_identity.changes[0].after == {"id": 1, "n": 1}  # doc absent, not None
    assert full_identity.changes[0].after == {"id": 1, "doc": doc, "n": 2}
    assert full_identity.changes[0].before == {"id": 1, "doc": doc, "n": 1}
    assert doc_changed.changes[0].after == {"id": 1, "doc": "small", "n": 3}


def test_column_changes_and_truncate_are_schema_changes(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY, gone INT)", "CREATE TABLE other (id INT PRIMARY KEY)")
    start = db.capture("a", "other")
    reader = db.reader("a")  # the schema as of the start, as a checkpoint records it
    end1 = db.commit("INSERT INTO a VALUES (1, 1)", "INSERT INTO other VALUES (1)")
    db.execute("ALTER TABLE a ADD COLUMN x TEXT, DROP COLUMN gone", "ALTER TABLE other ADD COLUMN y INT")
    db.commit("INSERT INTO a VALUES (2, 'two')", "INSERT INTO other VALUES (2, 2)")
    stop = db.commit("TRUNCATE a, other")

    items = list(reader.read(start, stop_at=stop))

    kinds = [(type(i).__name__, getattr(i, "statement", None)) for i in items if not isinstance(i, Idle)]
    assert kinds == [("Transaction", None), ("SchemaChange", "columns changed: added [x]; removed [gone]"),
                     ("Transaction", None), ("SchemaChange", "TRUNCATE public.a")]
    changed, truncated = [i for i in items if isinstance(i, SchemaChange)]
    assert changed.table == db.table("a") and changed.position == end1  # resuming there replays the change
    assert changed.kind is truncated.kind is SchemaChangeKind.OTHER  # a dropped column halts, as does a truncate
    assert transactions(items)[1].changes[0].after == {"id": 2, "x": "two"}
    assert truncated.position == transactions(items)[1].end


def test_invalidated_slot_is_a_lost_position(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    start = db.capture("a")
    db.execute("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'", "SELECT pg_reload_conf()")
    try:
        for i in range(3):  # fill and leave WAL segments, then let a checkpoint invalidate the slot
            db.execute(f"INSERT INTO a VALUES ({i})", "SELECT pg_switch_wal()")
        db.execute("CHECKPOINT")
        assert slot_state(db.conn, db.slot).wal_status == "lost"
    finally:
        db.execute("ALTER SYSTEM RESET max_slot_wal_keep_size", "SELECT pg_reload_conf()")

    with pytest.raises(PositionLost, match=f"slot {db.slot} .* was invalidated.*plan --replan"):
        list(db.reader("a").read(start, stop_at=db.position()))


def test_missing_publication_is_a_lost_position(db):
    db.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    start = ensure_slot(db.conn, db.slot)  # no publication: changes cannot be decoded
    stop = db.commit("INSERT INTO a VALUES (1)")

    with pytest.raises(PositionLost, match=f"publication {db.publication} is missing.*plan --replan"):
        list(db.reader("a").read(start, stop_at=stop))


@pytest.mark.parametrize("task_id, expected", [
    ("shop", "cdc_assets_shop"),
    ("Shop-EU.1", "cdc_assets_shop_eu_1_"),
    ("x" * 80, "cdc_assets_xxx"),
])
def test_slot_and_publication_names_are_plain_identifiers(task_id, expected):
    name = slot_name(task_id)
    assert name.startswith(expected) and len(name) <= 63 and name == publication_name(task_id)
    assert name.replace("_", "").isalnum() and name == name.lower()
    assert slot_name("shop-eu") != slot_name("shop_eu")


def test_changes_published_under_a_leaf_count_as_its_partitioned_table(db):
    db.execute("CREATE TABLE p (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id)",
               "CREATE TABLE p_1 PARTITION OF p FOR VALUES FROM (0) TO (10)",
               "CREATE TABLE p_2 PARTITION OF p FOR VALUES FROM (10) TO (20)")
    # As a publication made before publish_via_partition_root was set: the server names the leaves.
    db.execute(f"CREATE PUBLICATION {db.publication} FOR TABLE p")
    start = ensure_slot(db.conn, db.slot)
    stop = db.commit("INSERT INTO p VALUES (1, 1), (11, 11)", "UPDATE p SET v = 0 WHERE id = 11")

    (tx,) = transactions(db.reader("p").read(start, stop_at=stop))

    assert [(c.table, c.op, c.key) for c in tx.changes] == [
        (db.table("p"), Op.INSERT, (1,)), (db.table("p"), Op.INSERT, (11,)), (db.table("p"), Op.UPDATE, (11,))]


def test_a_relation_is_the_captured_table_it_was_when_recorded_whatever_its_name_now(db):
    """Two captured tables of one shape swap names while no read runs: the read began by resolving the names as
    they are then, so b's rows, sent under the name a, went to a, and no change of definitions showed, under every
    policy. The relation ids recorded with the definitions tell them apart."""
    db.execute("CREATE TABLE a (id INT PRIMARY KEY, v INT)", "CREATE TABLE b (id INT PRIMARY KEY, v INT)")
    start = db.capture("a", "b")
    reader = db.reader("a", "b")  # the definitions as the task recorded them
    db.execute("ALTER TABLE a RENAME TO swap", "ALTER TABLE b RENAME TO a", "ALTER TABLE swap RENAME TO b")
    stop = db.commit("INSERT INTO a VALUES (1, 1)")

    items = [i for i in reader.read(start, stop_at=stop) if not isinstance(i, Idle)]

    assert [i.table for i in items if isinstance(i, SchemaChange)] == [db.table("b")]
    assert items[0].renamed_to == db.table("a")
    assert [(c.table, c.key) for tx in transactions(items) for c in tx.changes] == [(db.table("b"), (1,))]


def test_a_relation_no_record_tells_the_table_of_stops_when_several_captured_tables_lack_their_name(db):
    """Definitions recorded without relation ids, two captured tables renamed: which one a relation is cannot be
    told, and a guess sent one table's rows to the other's target table."""
    db.execute("CREATE TABLE a (id INT PRIMARY KEY, v INT)", "CREATE TABLE b (id INT PRIMARY KEY, v INT)")
    start = db.capture("a", "b")
    reader = db.reader("a", "b")
    reader.schemas = {t: replace(s, storage=None) for t, s in reader.schemas.items()}
    db.execute("ALTER TABLE a RENAME TO a2", "ALTER TABLE b RENAME TO b2")
    stop = db.commit("INSERT INTO b2 VALUES (1, 1)")

    with pytest.raises(TableError, match=r"table public\.b2, which is one of the captured tables public\.a, public\.b"):
        list(reader.read(start, stop_at=stop))
