"""The headroom decision: figures -> ok / warn / lost, each with a text a person can act on."""
from cdc_assets.core.headroom import (BinlogFigures, Level, OplogFigures, SlotFigures, binlog_headroom, oplog_headroom,
                                      slot_headroom)

FILES = ("bin.000003", "bin.000004", "bin.000005")
DAY = 86400


def binlog(needed_file="bin.000004", retention=7 * DAY, age=DAY, reachable=False):
    return binlog_headroom(BinlogFigures("db:3306", f"{needed_file}:120", needed_file, FILES, needed_file in FILES,
                                         retention, age, reachable))


def test_binlog_with_most_of_the_retention_left_is_ok_and_says_how_much():
    h = binlog(age=DAY)
    assert h.level is Level.OK
    assert h.figures["seconds_left"] == 6 * DAY and h.figures["binlog_files_behind"] == 1
    assert "6.0 days left of a 7.0 days retention" in h.text


def test_binlog_expiring_within_a_quarter_of_the_retention_warns_what_to_do():
    h = binlog(age=6 * DAY)
    assert h.level is Level.WARN and "expires in 1.0 days" in h.text
    assert "binlog_expire_logs_seconds" in h.text


def test_binlog_past_its_expiry_but_still_listed_warns_at_zero():
    h = binlog(age=8 * DAY)
    assert h.level is Level.WARN and h.figures["seconds_left"] == 0


def test_purged_binlog_file_is_lost_with_the_way_out():
    h = binlog(needed_file="bin.000001")
    assert h.level is Level.LOST
    assert "bin.000001" in h.text and "oldest retained: bin.000003" in h.text
    assert "plan --replan" in str(h)


def test_purged_file_whose_gtid_set_reaches_the_oldest_file_resumes_there_with_its_retention():
    h = binlog(needed_file="bin.000001", reachable=True, age=2 * DAY)
    assert h.level is Level.OK and "resumes by its GTID set from the oldest retained file bin.000003" in h.text
    assert h.figures["binlog_files_behind"] == 2 and h.figures["seconds_left"] == 5 * DAY


def test_current_binlog_file_has_the_whole_retention_and_no_expiry_is_ok():
    assert binlog(needed_file="bin.000005", age=None).figures["seconds_left"] == 7 * DAY
    h = binlog(retention=None)
    assert h.level is Level.OK and "expires no binlogs" in h.text


def slot(**kw):
    figures = dict(slot="cdc_assets_t", server="pg:5432", exists=True, wal_status="reserved",
                   retained_bytes=100 << 20, max_keep_bytes=1 << 30, safe_bytes=(1 << 30) - (100 << 20))
    return slot_headroom(SlotFigures(**{**figures, **kw}))


def test_slot_well_within_max_slot_wal_keep_size_is_ok():
    h = slot()
    assert h.level is Level.OK and "holds 100.0 MB" in h.text and "924.0 MB left" in h.text


def test_slot_near_the_limit_warns_and_past_it_warns_of_the_next_checkpoint():
    near = slot(retained_bytes=900 << 20, safe_bytes=124 << 20)
    assert near.level is Level.WARN and "124.0 MB more" in near.text
    past = slot(wal_status="unreserved", retained_bytes=1100 << 20, safe_bytes=-(76 << 20))
    assert past.level is Level.WARN and "next checkpoint invalidates it" in past.text


def test_invalidated_or_missing_slot_is_lost_with_the_way_out():
    for h in (slot(wal_status="lost"), slot(exists=False)):
        assert h.level is Level.LOST and h.way_out and "plan --replan" in str(h)


def test_slot_without_a_limit_is_ok_and_says_the_disk_is_the_limit():
    h = slot(max_keep_bytes=None, safe_bytes=None, wal_status="extended")
    assert h.level is Level.OK and "only the disk" in h.text


def oplog(needed=(1000 + 6 * 3600, 1), first=(1000, 1), last=(1000 + 8 * 3600, 5)):
    return oplog_headroom(OplogFigures("mongodb://rs0", needed, first, last))


def test_oplog_holding_the_position_with_most_of_its_window_before_it_is_ok_and_says_how_much():
    h = oplog()
    assert h.level is Level.OK and h.figures["oplog_seconds_before_needed"] == 6 * 3600
    assert h.figures["oplog_window_seconds"] == 8 * 3600 and "6.0 hours of the 8.0 hours oplog window" in h.text


def test_oplog_about_to_drop_the_position_warns_what_to_do():
    h = oplog(needed=(1000 + 3600, 0))
    assert h.level is Level.WARN and "1.0 hours" in h.text and "replSetResizeOplog" in h.text


def test_oplog_past_the_position_is_lost_with_the_way_out_even_within_one_second():
    h = oplog(needed=(1000, 0))  # the oldest entry is (1000, 1): the position's own entry is gone
    assert h.level is Level.LOST and "plan --replan" in h.way_out
    assert oplog(needed=(1000, 1)).level is Level.WARN  # the oldest entry itself is still there


def test_oplog_before_any_position_or_unreadable_says_so():
    assert oplog(needed=None).level is Level.OK
    unreadable = oplog_headroom(OplogFigures("mongodb://rs0", (5000, 0), None, None))
    assert unreadable.level is Level.WARN and "local.oplog.rs" in unreadable.text
