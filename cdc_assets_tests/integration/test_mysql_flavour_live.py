"""Detection against a real MariaDB, and the position read with the statement the flavour chose."""
import threading

import pytest

from cdc_assets.core import gtid_sets
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.mysql_flavour import detect
from cdc_assets.sources.mysql import log_end
from cdc_assets.sources.mysql.source import MysqlSource


def test_the_private_mariadb_is_detected_and_its_position_read(servers):
    conn = servers.mariadb.connect()
    try:
        flavour = detect(conn)
        with conn.cursor() as cur:
            cur.execute(flavour.binlog_status_sql)
            file, offset = cur.fetchone()[:2]
            cur.execute("SELECT @@GLOBAL.gtid_binlog_pos")
            gtid = cur.fetchone()[0]
    finally:
        conn.close()
    assert flavour.mariadb and flavour.at_least(10, 5)
    source = MysqlSource(DbUrl.parse(servers.mariadb.url()))
    try:
        position = source.current_position()
    finally:
        source.close()
    assert position.file == file and position.pos >= offset
    assert position.gtid_set == gtid


def _opened_files(conn) -> int:
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Opened_files'")
        return int(cur.fetchone()[1])


def test_reading_the_log_end_on_mariadb_does_not_scan_the_binlog(servers):
    """BINLOG_GTID_POS opens and reads the binlog file from its start (its cost grows with the file); the log end
    is read between two reads of the GTID state instead, which opens no file."""
    conn = servers.mariadb.connect()
    source = MysqlSource(DbUrl.parse(servers.mariadb.url()))
    try:
        before = _opened_files(conn)
        positions = [source.current_position() for _ in range(20)]
        opened = _opened_files(conn) - before
    finally:
        source.close()
        conn.close()
    assert all(p.gtid_set for p in positions)
    assert opened < len(positions), f"{opened} files opened for {len(positions)} log ends: the binlog was scanned"


@pytest.mark.parametrize("bracket_reads", [log_end.BRACKET_READS, 0])
def test_the_log_end_s_gtid_set_is_the_set_logged_up_to_its_offset_while_writers_commit(servers, unique_name,
                                                                                        monkeypatch, bracket_reads):
    """Under commits from several writers (groups written between any two statements), each log end's GTID set is
    exactly BINLOG_GTID_POS at its offset (the same GTIDs; the two list domains in different orders): never one
    more (a resume by GTID would skip it), never one less. With no bracket read allowed, the scan alone answers."""
    monkeypatch.setattr(log_end, "BRACKET_READS", bracket_reads)
    servers.mariadb.create_database(unique_name)
    conn = servers.mariadb.connect(unique_name)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    halt = threading.Event()

    def write() -> None:
        writer = servers.mariadb.connect(unique_name)
        writer.autocommit(True)
        try:
            with writer.cursor() as cur:
                while not halt.is_set():
                    cur.execute("INSERT INTO t (v) VALUES (1)")
        finally:
            writer.close()

    writers = [threading.Thread(target=write, daemon=True) for _ in range(3)]
    for w in writers:
        w.start()
    source = MysqlSource(DbUrl.parse(servers.mariadb.url()))
    wrong = []
    try:
        positions = []
        for _ in range(150):
            positions.append(source.current_position())
        halt.set()
        for w in writers:
            w.join(30)
        with conn.cursor() as cur:
            for p in positions:
                cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (p.file, p.pos))
                exact = cur.fetchone()[0]
                if not (gtid_sets.contains(exact, p.gtid_set) and gtid_sets.contains(p.gtid_set, exact)):
                    wrong.append(f"{p.file}:{p.pos} read {p.gtid_set}, logged {exact}")
    finally:
        halt.set()
        source.close()
        conn.close()
    assert len({p.pos for p in positions}) > 10, "the writers did not move the log between the reads"
    assert not wrong, wrong[:5]
