"""GTID sets in positions: exact per transaction end, ordering across a failover, and where a stream opens.

Events are real library decodes of bytes laid out per the documented formats (MySQL internals manual /
libbinlogevents `Gtid_event`, `Xid_event`, `Query_event`; MariaDB KB "GTID_EVENT"), with CRC32 footers as
servers send them (binlog_checksum=CRC32, the default of both).
"""
from __future__ import annotations

import struct
import uuid
import zlib

import pymysql
import pytest
from pymysqlreplication.gtid import Gtid, GtidSet
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent

from cdc_assets.core import gtid_sets
from cdc_assets.core.positions import MysqlPosition, compare, earliest, is_before, latest, position_from_json
from cdc_assets.dbapi.mysql_flavour import MysqlFlavour
from cdc_assets.errors import PositionLost, PositionsIncomparable
from cdc_assets.sources.mysql.assembly import Assembler
from cdc_assets.sources.mysql.prepared_xa import PreparedBefore
from cdc_assets.sources.mysql.stream_start import ServerState, StreamStart, choose, gtids_before
from cdc_assets.core.urls import DbUrl

# The MySQL reference manual's own example source UUID (8.4 "GTID Format and Storage").
UUID_A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
UUID_B = "2174b383-5441-11e8-b90a-c80aa9429562"

QUERY_EVENT, XID_EVENT, ROTATE_EVENT, GTID_LOG_EVENT, MARIADB_GTID_EVENT = 0x02, 0x10, 0x04, 0x21, 0xA2
LOGICAL_CLOCK = 2  # Gtid_event lt_type


class _Ctl:
    """The two things a library event asks of its control connection."""
    charset = "utf8mb4"

    def __init__(self, dbms: str) -> None:
        self.dbms = dbms

    def _get_dbms(self) -> str:
        return self.dbms


def _decode(event_type: int, body: bytes, log_pos: int, *, server_id: int = 1, timestamp: int = 1700000000,
            dbms: str = "mysql"):
    size = 19 + len(body) + 4
    header = struct.pack("<IBIIIH", timestamp, event_type, server_id, size, log_pos, 0)
    data = header + body
    packet = pymysql.protocol.MysqlPacket(b"\x00" + data + zlib.crc32(data).to_bytes(4, "little"), "utf8")
    wrapper = BinLogPacketWrapper(
        packet, {}, _Ctl(dbms), (8, 4, 0), True,
        frozenset({GtidEvent, MariadbGtidEvent, QueryEvent, XidEvent, RotateEvent}),
        None, None, None, None, False, False, True, True, False)
    return wrapper.event


def mysql_gtid(source: str, gno: int, log_pos: int):
    # Gtid_event: gtid_flags(1) sid(16) gno(8) lt_type(1) last_committed(8) sequence_number(8)
    body = (b"\x00" + uuid.UUID(source).bytes + struct.pack("<Q", gno) + bytes([LOGICAL_CLOCK])
            + struct.pack("<QQ", gno - 1, gno))
    return _decode(GTID_LOG_EVENT, body, log_pos)


def mariadb_gtid(domain: int, server: int, seq: int, log_pos: int, flags: int = 0):
    # GTID_EVENT: seq_no(8) domain_id(4) flags2(1) then 6 bytes of zero (no FL_GROUP_COMMIT_ID)
    body = struct.pack("<QIB", seq, domain, flags) + b"\x00" * 6
    return _decode(MARIADB_GTID_EVENT, body, log_pos, server_id=server, dbms="mariadb")


def query(statement: str, log_pos: int, schema: str = "shop", dbms: str = "mysql"):
    # Query_event post-header: thread_id(4) exec_time(4) db_len(1) error_code(2) status_vars_len(2)
    db = schema.encode()
    body = struct.pack("<IIBHH", 7, 0, len(db), 0, 0) + db + b"\x00" + statement.encode()
    return _decode(QUERY_EVENT, body, log_pos, dbms=dbms)


def xid(number: int, log_pos: int, dbms: str = "mysql"):
    return _decode(XID_EVENT, struct.pack("<Q", number), log_pos, dbms=dbms)


# ---- GTID set arithmetic ---------------------------------------------------------------------------------------

def test_mysql_sets_add_and_contain_like_the_library_does():
    start = f"{UUID_A}:1-5:7,{UUID_B}:1-3"
    after = gtid_sets.add(start, f"{UUID_A}:6")
    assert after == f"{UUID_B}:1-3,{UUID_A}:1-7"
    library = GtidSet(start) + Gtid(f"{UUID_A}:6")  # the library's own interval arithmetic
    assert gtid_sets.parse_mysql(str(library)) == gtid_sets.parse_mysql(after)
    assert gtid_sets.contains(after, start) and not gtid_sets.contains(start, after)
    assert gtid_sets.contains(f"{UUID_A}:1-7", f"{UUID_A}:2-4:6")
    assert not gtid_sets.contains(f"{UUID_A}:1-7", f"{UUID_A}:2-4:8")
    # gtid_executed as SELECT @@gtid_executed prints more than one source: a newline after each comma
    assert gtid_sets.parse_mysql(f"{UUID_A}:1-5,\n{UUID_B}:1-3") == gtid_sets.parse_mysql(f"{UUID_B}:1-3,{UUID_A}:1-5")


def test_mysql_tagged_sets_keep_tags_apart():
    # MySQL 8.3+ tagged GTIDs, the set format of the 8.4 manual ("uuid:1-4:tag:1-3")
    tagged = f"{UUID_A}:1-4:aaaa:1-3"
    assert gtid_sets.add(tagged, f"{UUID_A}:aaaa:4") == f"{UUID_A}:1-4,{UUID_A}:aaaa:1-4"
    assert not gtid_sets.contains(f"{UUID_A}:1-9", f"{UUID_A}:aaaa:1")


def test_mariadb_positions_move_per_domain():
    # @@gtid_binlog_pos: one domain-server-seq per domain
    assert gtid_sets.add("0-1-12,1-2-5", "1-3-6") == "0-1-12,1-3-6"
    assert gtid_sets.add("", "0-1-1") == "0-1-1"
    assert gtid_sets.contains("0-2-13", "0-1-12")  # another server continued the domain
    assert not gtid_sets.contains("0-1-12,1-2-5", "1-2-6")
    assert not gtid_sets.contains("0-1-12", "0-1-12,1-2-1")


# ---- positions across servers ----------------------------------------------------------------------------------

def test_positions_of_one_server_order_by_file_and_offset_whatever_their_sets():
    a = MysqlPosition("mysql-bin.000002", 900, "0-1-9", "1")
    b = MysqlPosition("mysql-bin.000003", 4, "0-1-9", "1")
    assert is_before(a, b) and not is_before(b, a)
    legacy = MysqlPosition("mysql-bin.000003", 120)  # recorded before positions named their server
    assert is_before(b, legacy)


def test_positions_of_two_servers_order_by_gtid_sets():
    primary = MysqlPosition("mysql-bin.000007", 5120, f"{UUID_A}:1-40", UUID_A)
    replica_later = MysqlPosition("replica-bin.000002", 300, f"{UUID_A}:1-41", UUID_B)
    replica_same = MysqlPosition("replica-bin.000002", 200, f"{UUID_A}:1-40", UUID_B)
    assert is_before(primary, replica_later) and not is_before(replica_later, primary)
    assert compare(primary, replica_same) == 0
    assert earliest([replica_later, primary]) == primary and latest([primary, replica_later]) == replica_later


def test_positions_of_two_servers_that_sets_cannot_order_are_refused():
    primary = MysqlPosition("mysql-bin.000007", 5120, f"{UUID_A}:1-40:42", UUID_A)
    replica = MysqlPosition("replica-bin.000002", 300, f"{UUID_A}:1-41", UUID_B)
    with pytest.raises(PositionsIncomparable, match="neither GTID set holds the other.*plan --replan"):
        is_before(primary, replica)
    no_gtid = MysqlPosition("replica-bin.000002", 300, "", UUID_B)
    with pytest.raises(PositionsIncomparable, match=f"mysql-bin.000007:5120 of server {UUID_A}.*GTID set is missing"):
        is_before(primary, no_gtid)


def test_position_json_round_trips_its_server():
    p = MysqlPosition("mysql-bin.000003", 4663, "0-1-12", "1")
    assert position_from_json(p.to_json()) == p
    old = {"type": "MysqlCdc", "binlog_filename": "mysql-bin.000003", "next_event_position": 4663, "gtid_set": ""}
    assert position_from_json(old) == MysqlPosition("mysql-bin.000003", 4663)


# ---- the reader's boundaries -----------------------------------------------------------------------------------

def test_each_mysql_transaction_end_carries_the_set_with_its_gtid():
    start = MysqlPosition("binlog.000004", 157, f"{UUID_A}:1-5,{UUID_B}:1-3", UUID_A)
    asm = Assembler(start, {}, "mysql://x")
    ends = []
    for gno, (g, b, x) in zip((6, 7), ((236, 311, 342), (421, 496, 527))):
        for event in (mysql_gtid(UUID_A, gno, g), query("BEGIN", b), xid(gno, x)):
            if asm.feed(event) is not None:
                ends.append(asm.boundary)
    assert ends == [MysqlPosition("binlog.000004", 342, f"{UUID_B}:1-3,{UUID_A}:1-6", UUID_A),
                    MysqlPosition("binlog.000004", 527, f"{UUID_B}:1-3,{UUID_A}:1-7", UUID_A)]
    # DDL is a group of its own: GTID then the statement
    asm.feed(mysql_gtid(UUID_B, 4, 606))
    asm.feed(query("CREATE TABLE t (id INT PRIMARY KEY)", 740))
    assert asm.boundary.gtid_set == f"{UUID_B}:1-4,{UUID_A}:1-7"


def test_each_mariadb_transaction_end_moves_its_domain():
    start = MysqlPosition("mysql-bin.000001", 1000, "0-1-12,1-1-3", "1")
    asm = Assembler(start, {}, "mysql://x")
    asm.feed(mariadb_gtid(0, 1, 13, 1040))
    asm.feed(xid(55, 1100, dbms="mariadb"))
    assert asm.boundary == MysqlPosition("mysql-bin.000001", 1100, "0-1-13,1-1-3", "1")
    asm.feed(mariadb_gtid(1, 2, 4, 1140))
    asm.feed(query("COMMIT", 1200, dbms="mariadb"))  # an Aria/MyISAM group ends in COMMIT
    assert asm.boundary == MysqlPosition("mysql-bin.000001", 1200, "0-1-13,1-2-4", "1")


def test_a_stream_opened_by_gtid_takes_no_boundary_before_the_first_group():
    start = MysqlPosition("mysql-bin.000009", 777, "0-1-20", "1")  # the old primary's
    asm = Assembler(start, {}, "mysql://replica", server="2", by_gtid=True)
    # the start-up ROTATE names where the replica looked, not where "0-1-20" ends
    rotate = RotateEvent.__new__(RotateEvent)
    rotate.next_binlog, rotate.position = "replica-bin.000001", 4
    asm.feed(rotate)
    asm.caught_up("replica-bin.000001", 4)
    assert asm.boundary == start
    asm.feed(mariadb_gtid(0, 2, 21, 900))
    asm.feed(xid(3, 960, dbms="mariadb"))
    assert asm.boundary == MysqlPosition("replica-bin.000001", 960, "0-2-21", "2")
    asm.caught_up("replica-bin.000001", 1200)
    assert asm.boundary == MysqlPosition("replica-bin.000001", 1200, "0-2-21", "2")


# ---- where a stream opens --------------------------------------------------------------------------------------

URL = DbUrl.parse("mysql://cdc:secret@db2:3306")
MARIADB = MysqlFlavour.parse("10.11.19-MariaDB-0+deb12u1")


def test_stream_opens_by_file_on_the_same_server_and_by_gtid_elsewhere():
    state = ServerState(MARIADB, "2", ("replica-bin.000001", "replica-bin.000002"))
    own = MysqlPosition("replica-bin.000002", 400, "0-2-30", "2")
    assert choose(own, state, URL) == StreamStart(own)
    old = MysqlPosition("mysql-bin.000009", 777, "0-1-20", "1")
    assert choose(old, state, URL) == StreamStart(old, "0-1-20")
    same_name = MysqlPosition("replica-bin.000001", 777, "0-1-20", "1")  # a file name both servers have
    assert choose(same_name, state, URL).by_gtid
    purged = MysqlPosition("replica-bin.000000", 4, "0-2-1", "2")
    assert choose(purged, state, URL).by_gtid


def test_a_position_neither_file_nor_gtid_reaches_is_lost_with_the_way_out():
    state = ServerState(MARIADB, "2", ("replica-bin.000001",))
    with pytest.raises(PositionLost, match=r"db2:3306/ is server 2, not server 1 whose binlog holds mysql-bin.000009:777 of server 1.*no GTID set"
                                           r".*plan --replan") as err:
        choose(MysqlPosition("mysql-bin.000009", 777, "", "1"), state, URL)
    assert "secret" not in str(err.value)


def test_xa_commit_of_a_prepare_before_another_servers_position_is_refused():
    start = MysqlPosition("mysql-bin.000009", 777, "0-1-20", "1")
    lookup = PreparedBefore(URL, 4242, {}, start, server="2")
    with pytest.raises(PositionLost, match=r"X'61',X'',1 .* prepared before mysql-bin.000009:777 of server 1.*"
                                           r"another server"):
        lookup((b"a", b"", 1), MysqlPosition("replica-bin.000001", 960, "0-2-22", "2"))


def test_mysql_set_at_an_offset_from_show_binlog_events():
    # SHOW BINLOG EVENTS IN 'binlog.000004' columns (8.4 manual): Log_name, Pos, Event_type, Server_id,
    # End_log_pos, Info; Info of Previous_gtids is the set, of Gtid "SET @@SESSION.GTID_NEXT= 'uuid:n'".
    rows = [
        ("binlog.000004", 4, "Format_desc", 1, 126, "Server ver: 8.4.0, Binlog ver: 4"),
        ("binlog.000004", 126, "Previous_gtids", 1, 197, f"{UUID_A}:1-5"),
        ("binlog.000004", 197, "Gtid", 1, 276, f"SET @@SESSION.GTID_NEXT= '{UUID_A}:6'"),
        ("binlog.000004", 276, "Query", 1, 351, "BEGIN"),
        ("binlog.000004", 351, "Xid", 1, 382, "COMMIT /* xid=12 */"),
        ("binlog.000004", 382, "Gtid", 1, 461, f"SET @@SESSION.GTID_NEXT= '{UUID_A}:7'"),
        ("binlog.000004", 461, "Query", 1, 536, "BEGIN"),
        ("binlog.000004", 536, "Xid", 1, 567, "COMMIT /* xid=13 */"),
    ]
    assert gtids_before(rows, 4) == f"{UUID_A}:1-5"  # the start of the file: what earlier files logged
    assert gtids_before(rows, 197) == f"{UUID_A}:1-5"
    assert gtids_before(rows, 382) == f"{UUID_A}:1-6"
    assert gtids_before(rows, 567) == f"{UUID_A}:1-7"


def test_split_watermarks_of_the_old_server_filter_by_gtid_on_the_new_one():
    from cdc_assets.core.splits import SplitPlan
    from cdc_assets.core.tables import TableId
    from cdc_assets.core.watermarks import TableWatermarks

    plan = SplitPlan(TableId("shop", "orders"), "id", "int", (100,), (100, 100), "2026-01-01T00:00:00")
    highs = {0: MysqlPosition("mysql-bin.000003", 900, "0-1-40", "1"),
             1: MysqlPosition("mysql-bin.000003", 1900, "0-1-44", "1")}
    w = TableWatermarks(plan, highs)
    on_replica = MysqlPosition("replica-bin.000001", 120, "0-1-42", "2")  # a group the primary logged as 42
    assert not w.holds(50, on_replica) and w.holds(150, on_replica)
    assert not w.plain(on_replica) and w.plain(MysqlPosition("replica-bin.000001", 500, "0-2-45", "2"))
    other_domain = MysqlPosition("replica-bin.000001", 700, "1-2-1", "2")
    with pytest.raises(PositionsIncomparable, match=r"^the split high watermarks of shop.orders: .*plan --replan"):
        w.holds(50, other_domain)


def test_server_identity_and_binlog_list_statements_per_flavour():
    assert MARIADB.server_identity_sql == "SELECT @@GLOBAL.server_id"  # MariaDB has no server_uuid
    for version in ("8.0.36", "8.4.0"):
        flavour = MysqlFlavour.parse(version)
        assert flavour.server_identity_sql == "SELECT @@GLOBAL.server_uuid"
        assert flavour.binary_logs_sql == "SHOW BINARY LOGS"  # 8.4 removed only SHOW MASTER LOGS
