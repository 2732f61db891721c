"""Binlog events MariaDB never sends, replayed byte for byte through the library's stream reader and our
assembler: compressed transactions (TRANSACTION_PAYLOAD_EVENT), partial JSON updates (PARTIAL_UPDATE_ROWS_EVENT)
and row images carrying a column the described table lacks. The bytes are laid out per MySQL's formats, cited
in cdc_assets_tests/binlog_wire.py."""
from __future__ import annotations

import json

import pytest

from cdc_assets.core.events import Op, Transaction
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import SourceSetupError
from cdc_assets.sources.mysql.assembly import Assembler
from cdc_assets.sources.mysql.stream import BOUNDARY_EVENTS, READER_EVENTS, open_stream
from cdc_assets.sources.mysql.partial_json import Cell, Member, parse_path
from cdc_assets.sources.mysql.row_decoder import RowDecoders
from cdc_assets_tests import binlog_wire as w

TABLE = TableId("shop", "docs")
COLS = [w.INT("id"), w.INT("n", nullable=True), w.JSON("doc")]
SCHEMA = TableSchema(TABLE, (Column("id", Kind.INT, "int", nullable=False, bits=32),
                             Column("n", Kind.INT, "int", bits=32), Column("doc", Kind.JSON, "json")), ("id",))
URL = DbUrl.parse("mysql://repl@127.0.0.1:3306")
START = MysqlPosition("binlog.000001", 4)
TABLE_ID = 91


def read(events: list[bytes], schemas=None, kinds=READER_EVENTS, part_events=None):
    """What the reader makes of `events`: the stream exactly as BinlogReader opens it, fed to its assembler."""
    schemas = {TABLE: SCHEMA} if schemas is None else schemas
    stream = open_stream(URL, 4242, START, kinds, schemas)
    asm = Assembler(START, schemas, str(URL), None, part_events)
    out = []
    for event in w.replay(stream, events):
        out.extend(asm.feed(event) or [])
    return out, asm


def doc_text(doc) -> str:
    """A document as MySQL prints it (", " and ": "), for the few literals below."""
    return json.dumps(doc, ensure_ascii=False)


def begin() -> bytes:
    return w.event(w.QUERY, w.query("BEGIN"), 0, checksum=False)


def inner(kind: int, body: bytes) -> bytes:
    # Inside a payload: no checksum; log_pos as the server left it in its cache (0).
    return w.event(kind, body, 0, checksum=False)


def docs_map() -> bytes:
    return w.table_map(TABLE_ID, "shop", "docs", COLS, pk=[0])


# ---- TRANSACTION_PAYLOAD_EVENT -----------------------------------------------------------------------------------

def compressed_transaction(log: w.Binlog, gno: int, compression: int = 0) -> int:
    """INSERT two rows, UPDATE one, DELETE the other, in one compressed transaction; returns its end."""
    log.add(w.GTID, w.gtid(gno))
    doc1, doc2 = w.json_binary({"a": 1}), w.json_binary([1, "two"])
    events = [
        begin(),
        inner(w.TABLE_MAP, docs_map()),
        inner(w.WRITE_ROWS, w.rows_event(TABLE_ID, COLS, [w.row(COLS, [1, 10, doc1]), w.row(COLS, [2, None, doc2])])),
        inner(w.UPDATE_ROWS, w.rows_event(TABLE_ID, COLS, [w.row(COLS, [1, 10, doc1]), w.row(COLS, [1, 11, doc1])],
                                          two_bitmaps=True)),
        inner(w.DELETE_ROWS, w.rows_event(TABLE_ID, COLS, [w.row(COLS, [2, None, doc2])])),
        inner(w.XID, w.xid(gno)),
    ]
    return log.add(w.TRANSACTION_PAYLOAD, w.transaction_payload(events, compression))


def plain_transaction(log: w.Binlog, gno: int, row_id: int) -> int:
    log.add(w.GTID, w.gtid(gno))
    log.add(w.QUERY, w.query("BEGIN"))
    log.add(w.TABLE_MAP, docs_map())
    log.add(w.WRITE_ROWS, w.rows_event(TABLE_ID, COLS, [w.row(COLS, [row_id, 0, w.json_binary(None)])]))
    return log.add(w.XID, w.xid(gno))


@pytest.mark.parametrize("compression", [0, 255], ids=["zstd", "none"])
def test_a_compressed_transaction_arrives_whole_with_its_end_as_the_boundary(compression):
    log = w.Binlog()
    end = compressed_transaction(log, 5, compression)
    after = plain_transaction(log, 6, 3)
    out, asm = read(log.events)
    assert [type(i) for i in out] == [Transaction, Transaction], out  # main: the compressed one vanished
    first = out[0]
    assert first.end == MysqlPosition("binlog.000001", end, "3e11fa47-71ca-11e1-9e33-c80aa9429562:5")
    assert [(c.op, c.key) for c in first.changes] == [(Op.INSERT, (1,)), (Op.INSERT, (2,)), (Op.UPDATE, (1,)),
                                                      (Op.DELETE, (2,))]
    assert first.changes[0].after == {"id": 1, "n": 10, "doc": '{"a": 1}'}
    assert first.changes[1].after == {"id": 2, "n": None, "doc": '[1, "two"]'}
    assert first.changes[2].before["n"] == 10 and first.changes[2].after["n"] == 11
    # Row changes lie inside the transaction, strictly before its end.
    assert all(c.position.pos < end for c in first.changes)
    assert out[1].end.pos == after == asm.boundary.pos


def test_a_compressed_transaction_in_parts_hands_out_parts_before_its_end():
    log = w.Binlog()
    end = compressed_transaction(log, 5)
    out, _ = read(log.events, part_events=2)
    assert [len(i.changes) for i in out] == [2, 2, 0]
    assert out[-1].end.pos == end and all(p.floor.pos < end for p in out[:2])


def test_a_compressed_transaction_is_a_boundary_for_the_timestamp_search():
    """find_position_at streams BOUNDARY_EVENTS with no table: the payload's end must still count."""
    log = w.Binlog()
    end = compressed_transaction(log, 5)
    _, asm = read(log.events, schemas={}, kinds=BOUNDARY_EVENTS)
    assert asm.boundary.pos == end and not asm.inside


def test_a_compressed_transaction_of_another_table_is_read_past():
    other = TableSchema(TableId("shop", "other"), SCHEMA.columns, ("id",))
    log = w.Binlog()
    end = compressed_transaction(log, 5)
    out, asm = read(log.events, schemas={other.table: other})
    assert out == [] and asm.boundary.pos == end


def test_a_compressed_xa_prepare_is_held_until_its_commit():
    """The manual: binary log transaction compression can be applied to XA transactions. The prepared group is
    one payload (XA START, rows, XA END, XA_PREPARE); XA COMMIT comes later, uncompressed."""
    log = w.Binlog()
    log.add(w.GTID, w.gtid(5))
    log.add(w.TRANSACTION_PAYLOAD, w.transaction_payload([
        inner(w.QUERY, w.query("XA START X'6731',X'',1")), inner(w.TABLE_MAP, docs_map()),
        inner(w.WRITE_ROWS, w.rows_event(TABLE_ID, COLS, [w.row(COLS, [8, 1, w.json_binary(True)])])),
        inner(w.QUERY, w.query("XA END X'6731',X'',1")), inner(w.XA_PREPARE, w.xa_prepare(b"g1", b""))]))
    log.add(w.GTID, w.gtid(6))
    commit = log.add(w.QUERY, w.query("XA COMMIT X'6731',X'',1"))
    out, _ = read(log.events)
    assert len(out) == 1 and out[0].end.pos == commit
    assert [(c.op, c.key, c.after) for c in out[0].changes] == [(Op.INSERT, (8,), {"id": 8, "n": 1, "doc": "true"})]


def test_an_unreadable_payload_halts_naming_position_server_and_the_way_out():
    log = w.Binlog()
    log.add(w.GTID, w.gtid(5))
    body = bytearray(w.transaction_payload([begin(), inner(w.XID, w.xid(5))]))
    body[-3] ^= 0xFF  # damage the zstd frame
    end = log.add(w.TRANSACTION_PAYLOAD, bytes(body))
    with pytest.raises(SourceSetupError) as exc:
        read(log.events)
    message = str(exc.value)
    assert f"binlog.000001:{end}" in message
    assert "127.0.0.1:3306" in message and "binlog_transaction_compression=OFF" in message


# ---- PARTIAL_UPDATE_ROWS_EVENT -----------------------------------------------------------------------------------

BEFORE_DOC = {"name": "lamp", "tags": ["a", "b", "c"], "size": {"w": 1, "h": 2}}


def partial_update(log: w.Binlog, diffs: bytes | None, n_after: int = 7) -> int:
    """UPDATE docs SET n = 7, doc = JSON_...(doc, ...) WHERE id = 1, logged with PARTIAL_JSON."""
    log.add(w.GTID, w.gtid(9))
    log.add(w.QUERY, w.query("BEGIN"))
    log.add(w.TABLE_MAP, docs_map())
    before = w.row(COLS, [1, 5, w.json_binary(BEFORE_DOC)])
    if diffs is None:  # no JSON column changed in place: value_options 0, no partial bits
        after = w.lenenc(0) + w.row(COLS, [1, n_after, w.json_binary(BEFORE_DOC)])
    else:
        after = w.partial_after_image(COLS, [1, n_after, None], {"doc": diffs})
    log.add(w.PARTIAL_UPDATE_ROWS, w.rows_event(TABLE_ID, COLS, [before, after], two_bitmaps=True))
    return log.add(w.XID, w.xid(9))


def only_update(log: w.Binlog):
    out, _ = read(log.events)
    assert len(out) == 1 and len(out[0].changes) == 1
    change = out[0].changes[0]
    assert change.op is Op.UPDATE and change.key == (1,)
    return change


def test_every_json_diff_of_a_column_is_applied_not_just_the_first():
    diffs = (w.json_diff(0, "$.name", w.json_binary("desk"))  # JSON_REPLACE
             + w.json_diff(1, "$.color", w.json_binary("red"))  # JSON_SET of a new member
             + w.json_diff(2, "$.tags[1]")  # JSON_REMOVE
             + w.json_diff(1, "$.tags[5]", w.json_binary({"x": None}))  # JSON_SET past the end appends
             + w.json_diff(0, "$.tags[last-2]", w.json_binary("A"))
             + w.json_diff(0, '$."size".h', w.json_binary(3.5)))
    log = w.Binlog()
    partial_update(log, diffs)
    change = only_update(log)
    # Members sorted by key length then bytes, as MySQL stores (and prints) them.
    assert change.after == {"id": 1, "n": 7, "doc": doc_text(
        {"name": "desk", "size": {"h": 3.5, "w": 1}, "tags": ["A", "c", {"x": None}], "color": "red"})}
    assert change.before["doc"] == doc_text({"name": "lamp", "size": {"h": 2, "w": 1}, "tags": ["a", "b", "c"]})


def test_an_empty_json_diff_list_keeps_the_document_not_null():
    """JSON_REPLACE of a path that is not there changes nothing: the column is logged with no diff."""
    log = w.Binlog()
    partial_update(log, b"")
    change = only_update(log)
    assert change.after["doc"] == change.before["doc"] is not None  # main: None, the target would get NULL


def test_a_partial_update_event_without_partial_columns_is_an_update():
    log = w.Binlog()
    partial_update(log, None, n_after=8)
    change = only_update(log)
    assert change.after == {**change.before, "n": 8}


def test_a_json_diff_the_before_image_cannot_take_halts_naming_table_position_and_setting():
    log = w.Binlog()
    partial_update(log, w.json_diff(0, "$.missing", w.json_binary(1)))
    with pytest.raises(SourceSetupError) as exc:
        read(log.events)
    message = str(exc.value)
    assert "shop.docs" in message and '$."missing"' in message and "binlog.000001:" in message
    assert "binlog_row_value_options" in message and "127.0.0.1:3306" in message


def test_json_diffs_against_a_minimal_before_image_halt_naming_the_row_image_setting():
    """binlog_row_image=MINIMAL logs only the key in the before image: the document the diffs apply to is not
    in the binlog."""
    log = w.Binlog()
    log.add(w.GTID, w.gtid(9))
    log.add(w.QUERY, w.query("BEGIN"))
    log.add(w.TABLE_MAP, docs_map())
    before = w.bitmap([False]) + w.value(COLS[0], 1)  # only `id`
    after = w.partial_after_image(COLS, [1, 7, None], {"doc": w.json_diff(0, "$.name", w.json_binary("x"))})
    log.add(w.PARTIAL_UPDATE_ROWS, w.rows_event(TABLE_ID, COLS, [before, after], two_bitmaps=True,
                                                present=[True, False, False]))
    log.add(w.XID, w.xid(9))
    with pytest.raises(SourceSetupError) as exc:
        read(log.events)
    assert "column 'doc'" in str(exc.value) and "binlog_row_image=FULL" in str(exc.value)


@pytest.mark.parametrize("text, legs", [
    ("$", ()),
    ('$.a."b c"[3][last][last-2]', (Member(b"a"), Member(b"b c"), Cell(3), Cell(0, True), Cell(2, True))),
    ('$."quo\\"te".\u00e9t\u00e9', (Member(b'quo"te'), Member("\u00e9t\u00e9".encode()))),
])
def test_json_diff_paths_read_as_json_path_to_string_writes_them(text, legs):
    assert parse_path(text) == legs


# ---- a column the described table lacks --------------------------------------------------------------------------

def test_a_logged_column_the_schema_lacks_never_reaches_the_target_nor_shifts_values():
    """MySQL >= 8.0.13 keeps a functional index as a hidden virtual column named like '!hidden!idx!0!0'; whether
    or not a server logs it, a name the described table lacks is dropped and the others keep their values."""
    cols = [w.INT("id"), w.INT("!hidden!idx!0!0", nullable=True), w.INT("n", nullable=True), w.JSON("doc")]
    log = w.Binlog()
    log.add(w.GTID, w.gtid(3))
    log.add(w.QUERY, w.query("BEGIN"))
    log.add(w.TABLE_MAP, w.table_map(TABLE_ID, "shop", "docs", cols, pk=[0]))
    log.add(w.WRITE_ROWS, w.rows_event(TABLE_ID, cols, [w.row(cols, [1, 99, 5, w.json_binary([])])]))
    log.add(w.UPDATE_ROWS, w.rows_event(TABLE_ID, cols, [w.row(cols, [1, 99, 5, w.json_binary([])]),
                                                         w.row(cols, [1, 98, 6, w.json_binary([])])], two_bitmaps=True))
    log.add(w.XID, w.xid(3))
    out, _ = read(log.events)
    insert, update = out[0].changes
    assert insert.after == {"id": 1, "n": 5, "doc": "[]"}  # main: '!hidden!idx!0!0' rode along
    assert update.before == {"id": 1, "n": 5, "doc": "[]"} and update.after == {"id": 1, "n": 6, "doc": "[]"}


def test_rows_inside_a_compressed_transaction_are_read_by_the_specialised_decoder_as_the_library_reads_them(
        monkeypatch):
    """A table without MySQL's binary JSON takes the specialised row decoder (sources/mysql/row_decoder.py), also
    for the inner events of a payload, whose packets end in a stand-in for the checksum they lack."""
    cols = [w.INT("id"), w.INT("n", nullable=True)]
    schema = TableSchema(TABLE, SCHEMA.columns[:2], ("id",))
    log = w.Binlog()
    log.add(w.GTID, w.gtid(4))
    ints = w.table_map(TABLE_ID, "shop", "docs", cols, pk=[0])
    log.add(w.TRANSACTION_PAYLOAD, w.transaction_payload([
        begin(), inner(w.TABLE_MAP, ints),
        inner(w.WRITE_ROWS, w.rows_event(TABLE_ID, cols, [w.row(cols, [1, 10]), w.row(cols, [2, None])])),
        inner(w.UPDATE_ROWS, w.rows_event(TABLE_ID, cols, [w.row(cols, [1, 10]), w.row(cols, [1, -11])],
                                          two_bitmaps=True)),
        inner(w.DELETE_ROWS, w.rows_event(TABLE_ID, cols, [w.row(cols, [2, None])])),
        inner(w.XID, w.xid(4))]))
    decoded = []
    fast_rows, fast_pairs = RowDecoders.rows, RowDecoders.pairs
    monkeypatch.setattr(RowDecoders, "rows", lambda *a: decoded.append(fast_rows(*a)) or decoded[-1])
    monkeypatch.setattr(RowDecoders, "pairs", lambda *a: decoded.append(fast_pairs(*a)) or decoded[-1])
    fast, _ = read(log.events, schemas={TABLE: schema})
    monkeypatch.setattr(RowDecoders, "rows", lambda *a: None)
    monkeypatch.setattr(RowDecoders, "pairs", lambda *a: None)
    library, _ = read(log.events, schemas={TABLE: schema})
    assert len(decoded) == 3 and all(images is not None for images in decoded)
    assert [(c.op, c.key, c.after, c.before) for c in fast[0].changes] == [
        (Op.INSERT, (1,), {"id": 1, "n": 10}, None), (Op.INSERT, (2,), {"id": 2, "n": None}, None),
        (Op.UPDATE, (1,), {"id": 1, "n": -11}, {"id": 1, "n": 10}), (Op.DELETE, (2,), None, {"id": 2, "n": None})]
    assert fast == library
