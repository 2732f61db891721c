"""A split's verification result is a record of its own kind in every position store, position.log included: read
back as a SplitVerify, never as the split's RdbSnapshot record (which shares its key, the split id)."""
from cdc_assets.resumer.logfile import PositionLog
from cdc_assets.resumer.records import SNAPSHOT_DOING, SPLIT_VERIFY, PositionRecord
from cdc_assets.resumer.sqlite import SqlitePositionStore


def _records():
    doing = PositionRecord("t", SNAPSHOT_DOING, "shop.orders:0001",
                           {"type": "RdbSnapshot", "phase": "LOW_RECORDED", "reads": 1})
    verify = PositionRecord("t", SPLIT_VERIFY, "shop.orders:0001", {"type": "SplitVerify", "status": "failed"})
    return doing, verify


def test_position_log_keeps_verification_apart_from_the_split_record(tmp_path):
    log = PositionLog(tmp_path)
    doing, verify = _records()
    log.put([doing])
    log.put([verify])
    assert [r.position_data["type"] for r in log.load("t", SNAPSHOT_DOING, ["shop.orders:0001"])] == ["RdbSnapshot"]
    assert [r.position_data["status"] for r in log.load("t", SPLIT_VERIFY, ["shop.orders:0001"])] == ["failed"]
    assert "| split_verify |" in (tmp_path / "position.log").read_text()


def test_sqlite_store_keeps_verification_apart_from_the_split_record(tmp_path):
    store = SqlitePositionStore(tmp_path / "positions.sqlite")
    doing, verify = _records()
    store.put([doing, verify])
    assert [r.position_data["type"] for r in store.load("t", SNAPSHOT_DOING, ["shop.orders:0001"])] == ["RdbSnapshot"]
    assert [r.position_data["status"] for r in store.load("t", SPLIT_VERIFY, ["shop.orders:0001"])] == ["failed"]
    store.close()
