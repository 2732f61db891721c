"""A reset's record in position.log reads back as a reset (from_log resumes on these files), never as a split's."""
from cdc_assets.resumer.logfile import POSITION_LOG, PositionLog
from cdc_assets.resumer.records import CDC_RESET, SNAPSHOT_DOING, PositionRecord


def test_a_reset_record_reads_back_from_position_log_as_a_reset(tmp_path):
    log = PositionLog(tmp_path)
    record = PositionRecord("t1", CDC_RESET, "2026-11-23T22:40:01.123456",
                            {"type": CDC_RESET, "to": "latest", "by": "ops@host", "from": {"type": "PgCdc", "lsn": "0/1"},
                             "to_position": {"type": "PgCdc", "lsn": "0/2"}})
    log.put([record])
    assert " | reset | " in (tmp_path / POSITION_LOG).read_text()
    [back] = log.load("t1", CDC_RESET)
    assert (back.position_key, back.position_data) == (record.position_key, record.position_data)
    assert log.load("t1", SNAPSHOT_DOING) == []
