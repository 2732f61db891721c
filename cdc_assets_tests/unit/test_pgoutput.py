"""The pgoutput v1 decoder on messages built byte by byte from the protocol documentation."""
from __future__ import annotations

import struct
from datetime import datetime, timezone

import pytest

from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.sources.postgres import pgoutput
from cdc_assets.sources.postgres.drift import drift, recorded_shape, relation_shape
from cdc_assets.sources.postgres.pgoutput import (UNCHANGED, Begin, Commit, Delete, Insert, Origin, Relation,
                                                  RelationColumn, Truncate, Type, Update, decode)

WHEN = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)
WHEN_MICROS = int((WHEN - pgoutput.PG_EPOCH).total_seconds()) * 1_000_000 + WHEN.microsecond


def string(text: str) -> bytes:
    return text.encode() + b"\0"


def text(value: str) -> bytes:
    raw = value.encode()
    return pgoutput.TEXT + struct.pack(">i", len(raw)) + raw


def tuple_data(*columns: bytes) -> bytes:
    return struct.pack(">h", len(columns)) + b"".join(columns)


def test_begin_carries_the_final_lsn_commit_time_and_xid():
    payload = pgoutput.BEGIN + struct.pack(">QqI", 0x1_6B37_48, WHEN_MICROS, 4242)
    assert decode(payload) == Begin(final_lsn=0x16B3748, commit_time=WHEN, xid=4242)


def test_commit_carries_commit_and_end_lsn():
    payload = pgoutput.COMMIT + struct.pack(">bQQq", 0, 0x2_0000_0010, 0x2_0000_0040, WHEN_MICROS)
    assert decode(payload) == Commit(flags=0, commit_lsn=0x200000010, end_lsn=0x200000040, commit_time=WHEN)


def test_origin_and_type_messages():
    assert decode(pgoutput.ORIGIN + struct.pack(">Q", 99) + string("upstream")) == Origin(99, "upstream")
    assert decode(pgoutput.TYPE + struct.pack(">I", 16385) + string("public") + string("mood")) == \
        Type(16385, "public", "mood")


def test_relation_lists_columns_with_key_flags_types_and_typmods():
    payload = (pgoutput.RELATION + struct.pack(">I", 16390) + string("shop") + string("orders")
               + b"d" + struct.pack(">h", 3)
               + struct.pack(">b", 1) + string("id") + struct.pack(">Ii", 23, -1)
               + struct.pack(">b", 0) + string("prix €") + struct.pack(">Ii", 1700, (20 << 16 | 6) + 4)
               + struct.pack(">b", 0) + string("note") + struct.pack(">Ii", 25, -1))
    relation = decode(payload)
    assert relation == Relation(16390, "shop", "orders", "d", (
        RelationColumn(1, "id", 23, -1), RelationColumn(0, "prix €", 1700, (20 << 16 | 6) + 4),
        RelationColumn(0, "note", 25, -1)))
    assert [c.is_key for c in relation.columns] == [True, False, False]


def test_insert_values_null_text_and_binary():
    payload = (pgoutput.INSERT + struct.pack(">I", 7) + b"N"
               + tuple_data(text("1"), pgoutput.NULL, text("héllo 😀"),
                            pgoutput.BINARY + struct.pack(">i", 2) + b"\x00\xff", text("")))
    assert decode(payload) == Insert(7, ("1", None, "héllo 😀", b"\x00\xff", ""))



@pytest.mark.parametrize("relation_id", [7, 16_512])  # 16,512 has a byte >= 0x80 outside the tuple
def test_text_values_are_the_same_whether_or_not_the_tuple_is_ascii(relation_id):
    long_ascii = "x" * 200  # its length has a byte >= 0x80
    larger = "y" * pgoutput.SLICED_MESSAGE_BYTES  # a message over the bound: decoded value by value
    cases = [("plain", "1", "two"), ("héllo 😀", "ascii after", "é"), (long_ascii, "short", "tail"),
             ("", "\t\n", "\x7f"), (larger, "ascii", "é")]
    for values in cases:
        payload = (pgoutput.INSERT + struct.pack(">I", relation_id) + b"N"
                   + tuple_data(*map(text, values), pgoutput.BINARY + struct.pack(">i", 3) + b"a\x80b"))
        assert decode(payload) == Insert(relation_id, (*values, b"a\x80b"))
        update = pgoutput.UPDATE + struct.pack(">I", relation_id) + b"N" + tuple_data(*map(text, values))
        assert decode(update) == Update(relation_id, None, values)


def test_update_without_old_tuple_keeps_the_unchanged_toast_marker():
    payload = pgoutput.UPDATE + struct.pack(">I", 7) + b"N" + tuple_data(text("1"), pgoutput.UNCHANGED_TOAST, text("x"))
    update = decode(payload)
    assert update == Update(7, None, ("1", UNCHANGED, "x"), old_is_key=False)
    assert update.new[1] is UNCHANGED


def test_update_with_old_key_and_with_full_old_row():
    key_changed = pgoutput.UPDATE + struct.pack(">I", 7) + b"K" + tuple_data(text("1"), pgoutput.NULL) \
        + b"N" + tuple_data(text("2"), text("b"))
    assert decode(key_changed) == Update(7, ("1", None), ("2", "b"), old_is_key=True)
    full = pgoutput.UPDATE + struct.pack(">I", 7) + b"O" + tuple_data(text("1"), text("a")) \
        + b"N" + tuple_data(text("1"), text("b"))
    assert decode(full) == Update(7, ("1", "a"), ("1", "b"), old_is_key=False)


def test_delete_with_key_and_with_full_old_row():
    assert decode(pgoutput.DELETE + struct.pack(">I", 7) + b"K" + tuple_data(text("5"), pgoutput.NULL)) == \
        Delete(7, ("5", None), old_is_key=True)
    assert decode(pgoutput.DELETE + struct.pack(">I", 7) + b"O" + tuple_data(text("5"), text("e"))) == \
        Delete(7, ("5", "e"), old_is_key=False)


def test_truncate_lists_relations_and_options():
    payload = pgoutput.TRUNCATE + struct.pack(">Ib", 2, pgoutput.TRUNCATE_RESTART_IDENTITY) + struct.pack(">II", 7, 8)
    assert decode(payload) == Truncate((7, 8), pgoutput.TRUNCATE_RESTART_IDENTITY)


def test_a_transaction_captured_from_postgresql_15_decodes():
    # INSERT INTO cap VALUES (1, 'one', NULL) on `cap (id int primary key, v text, b bytea)`, as streamed.
    captured = [bytes.fromhex(h) for h in (
        "420000000001516ca0000303dc85e343ab000002d6",
        "52000040007075626c696300636170006400030169640000000017ffffffff00760000000019ffffffff00620000000011ffffffff",
        "49000040004e000374000000013174000000036f6e656e",
        "43000000000001516ca00000000001516cd0000303dc85e343ab",
    )]
    begin, relation, insert, commit = [decode(p) for p in captured]
    assert (begin.final_lsn, begin.xid) == (commit.commit_lsn, 726)
    assert relation == Relation(16384, "public", "cap", "d", (
        RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1), RelationColumn(0, "b", 17, -1)))
    assert insert == Insert(16384, ("1", "one", None))
    assert commit.end_lsn == 22113488 and commit.commit_time == begin.commit_time


@pytest.mark.parametrize("payload, error", [
    (b"M\x00", "unknown pgoutput message type b'M'"),
    (pgoutput.INSERT + struct.pack(">I", 7) + b"X", "expected a new tuple"),
    (pgoutput.INSERT + struct.pack(">I", 7) + b"N" + struct.pack(">h", 1) + b"q", "unknown tuple column kind b'q'"),
    (pgoutput.INSERT + struct.pack(">I", 7) + b"N" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 9) + b"ab",
     "runs past the end"),
])
def test_malformed_messages_are_refused(payload, error):
    with pytest.raises(ValueError, match=error):
        decode(payload)


def test_a_relation_is_compared_with_the_recorded_schema_by_format_type():
    names = {(23, -1): "integer", (25, -1): "text", (1700, 655366): "numeric(10,2)", (1700, 655368): "numeric(10,4)"}
    recorded = recorded_shape(TableSchema(TableId("s", "t"), (
        Column("id", Kind.INT, "integer"), Column("v", Kind.STRING, "text"), Column("n", Kind.DECIMAL, "numeric(10,2)")),
        ("id",)))

    def relation(name: str, *columns: tuple[str, int, int]) -> Relation:
        return Relation(1, "s", name, "d", tuple(RelationColumn(int(c == "id"), c, oid, mod) for c, oid, mod in columns))

    same = relation("t", ("id", 23, -1), ("v", 25, -1), ("n", 1700, 655366))
    assert not drift(recorded, relation_shape(same, lambda *k: names[k]))  # no key in a recorded schema
    drifted = relation("t2", ("id", 23, -1), ("w", 25, -1), ("n", 1700, 655368))
    assert drift(recorded, relation_shape(drifted, lambda *k: names[k])).describe() == (
        "columns changed: added [w]; removed [v]; retyped [n]; renamed to s.t2")
    rekeyed = Relation(1, "s", "t", "f", tuple(RelationColumn(1, c.name, c.type_oid, c.atttypmod) for c in same.columns))
    assert drift(relation_shape(same, lambda *k: names[k]), relation_shape(rekeyed, lambda *k: names[k])).describe() == (
        "replica identity changed: [id] -> [id, v, n]")
