"""Text in every character set the server lists: the log phase decodes a value's bytes into the very text the
snapshot copies (the server's own conversion to utf8mb4), for CHAR, VARCHAR, TEXT, ENUM and SET, with NULLs here
and there, into both targets and through both snapshot paths (the pipe and Spark's JDBC). A charset the log cannot
decode exactly stops the plan by name."""
import pytest

from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets.errors import TableError, UnmappedType
from cdc_assets.sources.mysql import charsets
from cdc_assets.sources.mysql.row_decoder import RowDecoders
from cdc_assets.sources.mysql.source import MysqlSource
from cdc_assets_tests.integration.test_binlog_row_decoder import changes
from cdc_assets_tests.integration.test_type_fidelity import target_conn, texts, through_the_log
from cdc_assets_tests.support import config_for, execute, source_database

# Text each charset holds what it can of ('?' for the rest, as the server stores it): letters of many scripts,
# the characters some Asian charsets map apart (backslash, tilde, fullwidth forms), COPY's escapes, a trailing space.
SAMPLE = "a\\b~ üéß€ Ωλ Жж שלום ไทย 日本語 中文 한국 ＼～￥ 🚀 tab\there\nnew "
LABELS = ["ü", "é", "ß", "€", "ą", "Ω", "Ж", "ש", "ไ", "日本", "中文", "한국", "＼"]
ROWS = 4  # row 1 the sample, 2 the charset's high bytes, 3 NULLs in every other column, 4 empty texts


def decodable(cur) -> list[str]:
    cur.execute("SHOW CHARACTER SET")
    return sorted(name for name, *_ in cur.fetchall() if charsets.codec(name) is not None)


def labels(cur, charset: str) -> list[str]:
    """Two labels of non-ASCII characters the charset holds (round trip through it unchanged) after ASCII ones,
    one with capitals and a quote, one with a backslash (COLUMN_TYPE escapes both)."""
    cur.execute("SELECT " + ", ".join(f"CONVERT(CONVERT(%s USING {charset}) USING utf8mb4) = %s" for _ in LABELS),
                [v for label in LABELS for v in (label, label)])
    held = [label for label, same in zip(LABELS, cur.fetchone()) if same]
    return ["a", "b c", "It's", "x\\y", *held[:2]]


def quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''").replace("\t", "\\t").replace("\n", "\\n") + "'"


def seed(cur, names: list[str]) -> tuple[list[str], list[str]]:
    """DDL and the rows of a table with a CHAR, VARCHAR, TEXT, ENUM and SET column in each charset."""
    columns, first, high, nulls, empty = [], [], [], [], []
    for n, charset in enumerate(names):
        members = labels(cur, charset)
        declared = ", ".join(quoted(m) for m in members)
        columns += [f"c_{charset} CHAR(40) CHARACTER SET {charset}", f"v_{charset} VARCHAR(200) CHARACTER SET {charset}",
                    f"t_{charset} TEXT CHARACTER SET {charset}", f"e_{charset} ENUM({declared}) CHARACTER SET {charset}",
                    f"s_{charset} SET({declared}) CHARACTER SET {charset}"]
        text = quoted(SAMPLE)
        first += [text, text, text, quoted(members[-1]), quoted(f"{members[-1]},a")]
        # Every byte 0x80..0xFF as the column's own bytes: single-byte charsets only (one character a byte).
        raw = (f"CAST(X'{bytes(range(0x80, 0x100)).hex()}' AS CHAR CHARACTER SET {charset})"
               if charset in charsets.SINGLE_BYTE and charset != "ascii" else quoted(f"{members[-2]} "))
        high += [raw, raw, raw, quoted(members[-2]), quoted(f"{members[-2]},{members[-1]}")]
        nulls += ["NULL", "' x '", "NULL", "'a'", "NULL"] if n % 2 else ["'x  '", "NULL", "'y'", "NULL", "''"]
        empty += ["''", "''", "''", "'b c'", "''"]
    ddl = "CREATE TABLE t (id INT PRIMARY KEY, " + ", ".join(columns) + ")"
    return ([ddl, "SET SESSION sql_mode = ''"],
            [f"({i}, {', '.join(values)})" for i, values in enumerate((first, high, nulls, empty), start=1)])


def source_texts(conn, db: str) -> dict[int, dict[str, str | None]]:
    """The source's own text of every value: `CONVERT(col USING utf8mb4)`, what the snapshot copies."""
    return texts(conn, "mysql", db, "t")


TARGETS = [("postgres", True), ("postgres", False), ("mysql", False)]


@pytest.mark.parametrize("target_kind, pipe", TARGETS, ids=["postgres-pipe", "postgres-jdbc", "mysql"])
def test_text_in_every_charset_lands_as_the_snapshot_copies_it(tmp_path, servers, mariadb_target, spark, unique_name,
                                                               target_kind, pipe):
    """Snapshot, then the same rows again through the log (INSERT, an UPDATE of every column, an UPDATE of every
    column to the next row's values): every copy renders on the target as the source renders its value."""
    admin = servers.mariadb.connect()
    with admin.cursor() as cur:
        names = decodable(cur)
        ddl, rows = seed(cur, names)
    admin.close()
    assert {"utf16", "utf16le", "ucs2", "utf32", "latin1", "cp1250", "sjis", "gbk"} <= set(names)
    shifted = [f"({200 + k}{row[row.index(','):]}" for k, row in enumerate(rows[1:] + rows[:1], start=1)]
    copies = [f"({300 + k}{row[row.index(','):]}" for k, row in enumerate(rows, start=1)]
    seed_sql = [*ddl, "INSERT INTO t VALUES " + ", ".join(rows + shifted + copies)]
    target_db = f"{unique_name}_to_{target_kind}"
    with source_database(servers, "mysql", unique_name, seed_sql) as src:
        tgt = target_conn(servers, target_kind, target_db, mariadb_target)
        config = config_for(tmp_path, servers, task_id="charsets", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target=target_kind, target_db=target_db,
                            target_server=mariadb_target if target_kind == "mysql" else None,
                            snapshot={"split_size": 4, "pipe": pipe})
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        try:
            [tp] = ensure_plans(rt)
            results = snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
            assert sum(r.rows for r in results) == 3 * ROWS
            through_the_log(src, "mysql", "t", rows)
            sync(rt, until_caught_up=True)
        finally:
            rt.close()
        source = source_texts(src, unique_name)
    written = texts(tgt, target_kind, unique_name, "t")
    tgt.close()
    assert sorted(written) == sorted(source) and len(source) == 4 * ROWS
    assert source[1]["v_utf16"] == source[1]["v_utf8mb4"] == SAMPLE  # the sample itself, where it fits whole
    differ = [f"row {i} column {c}: {written[i][c]!r}, the source's text {want!r}"
              for i in sorted(source) for c, want in source[i].items() if written[i][c] != want]
    assert not differ, f"{len(differ)} values differ:\n" + "\n".join(differ[:40])


def test_every_charset_decodes_as_the_server_converts_or_is_refused(servers):
    """Each codec against the server's own conversion: every byte of a single-byte charset; every sequence of one
    or two bytes a multi-byte charset maps to one character; characters across Unicode's planes for the UTF ones.
    Every charset the server lists is decoded, binary, or refused by name (`unreadable`)."""
    conn = servers.mariadb.connect("mysql")  # seq_* tables: MariaDB's sequence engine, there in any database
    differ: dict[str, list] = {}
    with conn.cursor() as cur:
        cur.execute("SHOW CHARACTER SET")
        listed = {name: width for name, _, _, width in cur.fetchall()}
        for charset, width in listed.items():
            if charset == charsets.BINARY or charsets.unreadable(charset):
                continue
            for raw, server in _server_texts(cur, charset, width):
                try:
                    ours = raw.decode(charsets.codec(charset))
                except UnicodeDecodeError:
                    ours = None
                if ours != server:
                    differ.setdefault(charset, []).append((raw.hex(), server, ours))
    conn.close()
    assert not differ, {c: (len(d), d[:5]) for c, d in differ.items()}
    assert {"utf16", "ucs2", "utf32", "latin1", "sjis", "gbk", "cp932"} <= {c for c in listed if charsets.codec(c)}
    assert {"big5", "swe7"} <= {c for c in listed if charsets.unreadable(c)}


UNICODE_SAMPLES = ["a", "é", "€", "日", "\uffff", "🚀", "\U0010ffff", "ab\u00a0c"]


def _server_texts(cur, charset: str, width: int) -> list[tuple[bytes, str]]:
    """(bytes in `charset`, the server's text of them) for the values a column in it can hold."""
    if charset.startswith(("utf", "ucs")):
        cur.execute("SELECT " + ", ".join(f"HEX(CONVERT(%s USING {charset})), "
                                          f"HEX(CONVERT(CONVERT(%s USING {charset}) USING utf8mb4))"
                                          for _ in UNICODE_SAMPLES), [v for s in UNICODE_SAMPLES for v in (s, s)])
        row = cur.fetchone()
        return [(bytes.fromhex(row[i]), bytes.fromhex(row[i + 1]).decode()) for i in range(0, len(row), 2)]
    out = []
    for digits, seq in ((2, "seq_0_to_255"), (4, "seq_32768_to_65535"))[:1 if width == 1 else 2]:
        cur.execute(f"SELECT seq, HEX(CONVERT(CAST(UNHEX(LPAD(HEX(seq), {digits}, '0')) AS CHAR CHARACTER SET "
                    f"{charset}) USING utf8mb4)) FROM {seq}")
        for n, converted in cur.fetchall():
            server = bytes.fromhex(converted).decode()
            # A multi-byte charset's bytes the server cannot read as one character are no value a column holds.
            if width == 1 or (len(server) == 1 and server != "?"):
                out.append((n.to_bytes(digits // 2, "big"), server))
    return out


@pytest.mark.parametrize("charset", ["big5", "swe7"])
def test_text_in_a_charset_the_log_cannot_decode_stops_the_plan(tmp_path, servers, unique_name, charset):
    seed_rows = [f"CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10) CHARACTER SET {charset}, "
                 f"e ENUM('a','b') CHARACTER SET {charset})", "INSERT INTO t VALUES (1, 'a', 'b')"]
    with source_database(servers, "mysql", unique_name, seed_rows):
        config = config_for(tmp_path, servers, task_id="charsets_plan", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target="postgres", target_db=f"{unique_name}_tgt")
        rt = TaskRuntime(config)
        try:
            with pytest.raises(UnmappedType) as refused:
                ensure_plans(rt)
        finally:
            rt.close()
    message = str(refused.value)
    assert f"column 'v' of {unique_name}.t (varchar(10)) holds text in character set {charset}" in message
    assert "CHARACTER SET utf8mb4" in message and f"source.exclude_columns: {{{unique_name}.t: [v]}}" in message


def test_the_library_reads_every_charset_as_the_row_decoder_does(servers, unique_name, monkeypatch):
    """An event the row decoder leaves to the library (a partial image, MySQL's binary JSON) decodes text alike:
    both give each row's values as the source's own text."""
    admin = servers.mariadb.connect()
    with admin.cursor() as cur:
        ddl, rows = seed(cur, decodable(cur))
    admin.close()
    with source_database(servers, "mysql", unique_name, ddl) as src:
        url = DbUrl.parse(servers.mariadb.url(unique_name))
        source = MysqlSource(url)
        try:
            start = source.current_position()
            execute(src, f"INSERT INTO t VALUES {', '.join(rows)}", "UPDATE t SET id = id + 10")
            end = source.current_position()
            schema = source.describe(TableId(unique_name, "t"))
        finally:
            source.close()
        expected = source_texts(src, unique_name)
    fast = changes(url, {schema.table: schema}, start, end)
    monkeypatch.setattr(RowDecoders, "rows", lambda *a: None)
    monkeypatch.setattr(RowDecoders, "pairs", lambda *a: None)
    library = changes(url, {schema.table: schema}, start, end)
    assert [repr(c) for c in library] == [repr(c) for c in fast] and len(fast) == 2 * ROWS
    for change in fast[ROWS:]:  # the updates: the rows after, under their new ids
        want = expected[change.after["id"]]
        got = {name: value for name, value in change.after.items() if name != "id"}
        assert got == {name: want[name] for name in got}, change.after["id"]



@pytest.mark.parametrize("decoder", ["row decoder", "library"])
@pytest.mark.parametrize("charset, sequence", [("gbk", "a140"), ("sjis", "81ad"), ("euckr", "a2e8")])
def test_a_stored_sequence_the_server_cannot_convert_stops_the_log_naming_table_column_and_position(
        servers, unique_name, monkeypatch, charset, sequence, decoder):
    """A multi-byte charset's well-formed sequence that maps to no character (the server keeps its bytes, its
    conversion gives '?') is no text the log could write as the snapshot does: the read stops with a CdcError,
    not a bare UnicodeDecodeError, for an insert and for an update, on both decoding paths."""
    ddl = [f"CREATE TABLE t (id INT PRIMARY KEY, ok VARCHAR(4) CHARACTER SET utf8mb4, "
           f"v VARCHAR(4) CHARACTER SET {charset})"]
    with source_database(servers, "mysql", unique_name, ddl) as src:
        with src.cursor() as cur:
            cur.execute(f"SELECT CONVERT(CAST(UNHEX('{sequence}') AS CHAR CHARACTER SET {charset}) USING utf8mb4)")
            assert cur.fetchone()[0] == "?"  # the server has no character for it either
        url = DbUrl.parse(servers.mariadb.url(unique_name))
        source = MysqlSource(url)
        try:
            schema = source.describe(TableId(unique_name, "t"))
            for statement in (f"INSERT INTO t VALUES (1, 'a', UNHEX('{sequence}'))",
                              f"UPDATE t SET v = UNHEX('{sequence}'), ok = 'b' WHERE id = 2"):
                execute(src, "DELETE FROM t", "INSERT INTO t VALUES (2, 'a', 'x')")
                start = source.current_position()
                execute(src, statement)
                end = source.current_position()
                if decoder == "library":
                    monkeypatch.setattr(RowDecoders, "rows", lambda *a: None)
                    monkeypatch.setattr(RowDecoders, "pairs", lambda *a: None)
                with pytest.raises(TableError) as stopped:
                    changes(url, {schema.table: schema}, start, end)
                message = str(stopped.value)
                assert f"{unique_name}.t" in message and f"v ({charset})" in message, message
                assert sequence[:2] in message.replace(" ", "") and end.file in message, message
                assert "re-snapshot the table" in stopped.value.hint
                monkeypatch.undo()
        finally:
            source.close()
