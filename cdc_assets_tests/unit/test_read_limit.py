"""Read limits (core/read_limit.py) on a fake clock: the average since the start never exceeds the rate, a
continuous reader reaches it, idle time saves up at most one second, and the log phase's pacer measures only
what it needs."""
import pytest

from cdc_assets.config import ReadLimit
from cdc_assets.core.events import Op, RowChange
from cdc_assets.core.read_limit import BURST_SECS, ChangePacer, Pacer, TokenBucket, change_bytes, share, value_bytes
from cdc_assets.core.tables import TableId
from cdc_assets.errors import ConfigError


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.parametrize("take", [1, 7, 250, 5000])
def test_the_average_since_the_start_never_exceeds_the_rate(take):
    """Taking as fast as allowed (no time passes between takes but the waits): after every wait the tokens taken
    are at most rate * elapsed, and the reader reaches the rate, not less."""
    clock = FakeClock()
    bucket = TokenBucket(1000, 1000 * BURST_SECS, clock)
    start, taken = clock.now, 0
    for _ in range(200):
        taken += take
        clock.sleep(bucket.take(take))
        assert taken <= 1000 * (clock.now - start) + 1e-6
    assert taken / (clock.now - start) == pytest.approx(1000, rel=1e-9)


def test_work_between_takes_counts_toward_the_wait():
    clock = FakeClock()
    bucket = TokenBucket(100, 100, clock)
    clock.now += 0.3  # reading 50 rows took 0.3 s: 0.2 s more to wait for them
    assert bucket.take(50) == pytest.approx(0.2)
    clock.now += 0.2
    clock.now += 1.0  # then 1 s of nothing: the slower reader is not paced at all
    assert bucket.take(100) == 0.0


def test_idle_time_saves_up_at_most_the_burst():
    clock = FakeClock()
    bucket = TokenBucket(100, 100, clock)
    clock.now += 60.0  # a minute idle saves one second (100 tokens), not 6000
    assert bucket.take(100) == 0.0
    assert bucket.take(100) == pytest.approx(1.0)


def test_a_bucket_needs_a_positive_rate():
    with pytest.raises(ValueError):
        TokenBucket(0, 1)


def test_the_pacer_waits_for_the_slower_of_rows_and_bytes():
    clock = FakeClock()
    pacer = Pacer(1000, 10_000, clock, clock.sleep)
    assert pacer.active
    assert pacer.pace(100, 500) == pytest.approx(0.1)  # rows decide: 0.1 s; bytes would need 0.05 s
    assert pacer.pace(10, 5000) == pytest.approx(0.45)  # bytes decide: 5500 B at 10,000 B/s end at 0.55 s
    assert clock.now - 1000.0 == pytest.approx(0.55)
    unlimited = Pacer(None, None, clock, clock.sleep)
    assert not unlimited.active and unlimited.pace(10**9, 10**12) == 0.0


def test_each_task_gets_its_share():
    assert share(20_000, 4) == 5000 and share(None, 4) is None and share(300, 0) == 300


def test_value_bytes_counts_text_and_binary_by_length_and_others_as_eight():
    assert value_bytes(["abc", b"\x00\x01", 12, None, 3.5, "é"]) == 3 + 2 + 8 + 8 + 8 + 1
    table = TableId.parse("shop.items")
    insert = RowChange(table, Op.INSERT, (1,), {"id": 1, "name": "four"})
    delete = RowChange(table, Op.DELETE, (1,), None, {"id": 1, "name": "four"})
    bare_delete = RowChange(table, Op.DELETE, ("k1",), None)
    assert [change_bytes(c) for c in (insert, delete, bare_delete)] == [12, 12, 2]


def test_the_change_pacer_limits_events_and_bytes_since_it_started():
    clock = FakeClock()
    waits = []

    def wait(seconds):
        waits.append(seconds)
        clock.sleep(seconds)

    table = TableId.parse("shop.items")
    batch = [RowChange(table, Op.INSERT, (i,), {"id": i, "name": "x" * 92}) for i in range(100)]  # 100 B each
    events_only = ChangePacer(500, None, wait, clock)
    for _ in range(5):
        events_only.count(batch)
        events_only.pace()
    assert clock.now - 1000.0 == pytest.approx(1.0)  # 500 events at 500/s
    assert events_only.pace() == 0.0  # nothing counted since: no wait
    start = clock.now
    bytes_only = ChangePacer(None, 20_000, wait, clock)
    bytes_only.count(batch)
    bytes_only.count(batch)
    assert bytes_only.pace() == pytest.approx(1.0) and clock.now - start == pytest.approx(1.0)  # 20,000 B


def test_without_a_limit_the_change_pacer_neither_measures_nor_waits():
    class Unsized:
        @property
        def after(self):
            raise AssertionError("measured a change without a limit")

    pacer = ChangePacer(None, None, lambda s: pytest.fail("waited without a limit"))
    pacer.count([Unsized()] * 3)
    assert pacer.pace() == 0.0
    events_only = ChangePacer(10, None, lambda s: None)
    events_only.count([Unsized()] * 3)  # a rows limit alone does not need the bytes


def test_the_config_takes_read_limits_and_refuses_zero(tmp_path):
    from cdc_assets.config import parse_config

    raw = {"task_id": "t", "source": {"db_type": "mysql", "url": "mysql://u:p@h:3306/", "tables": ["a.b"]},
           "target": {"db_type": "postgres", "url": "postgresql://u:p@h:5432/w"}}
    config = parse_config(raw, tmp_path)
    assert config.snapshot.read_limit == ReadLimit() and config.pipeline.read_limit.rows_per_second is None
    limited = parse_config({**raw, "snapshot": {"read_limit": {"rows_per_second": 20000}},
                            "pipeline": {"read_limit": {"bytes_per_second": 1_000_000}}}, tmp_path)
    assert limited.snapshot.read_limit.rows_per_second == 20000
    assert limited.pipeline.read_limit.bytes_per_second == 1_000_000
    with pytest.raises(ConfigError, match="snapshot.read_limit.rows_per_second"):
        parse_config({**raw, "snapshot": {"read_limit": {"rows_per_second": 0}}}, tmp_path)


def test_a_stop_request_ends_the_wait_at_once():
    import threading
    import time

    stop = threading.Event()
    pacer = ChangePacer(1, None, stop.wait)
    table = TableId.parse("shop.items")
    pacer.count([RowChange(table, Op.INSERT, (i,), {"id": i}) for i in range(100)])  # 100 s at 1 event/s
    threading.Timer(0.2, stop.set).start()
    began = time.monotonic()
    assert pacer.pace() == pytest.approx(100, rel=0.01)  # what it asked for ...
    assert time.monotonic() - began < 5  # ... and how long it waited: until the stop request


def test_paced_rows_pass_every_row_and_wait_for_their_bytes():
    import time

    from cdc_assets.core.read_limit import TaskShare, paced_rows

    rows = [("x" * 92, i) for i in range(50)]  # 100 estimated bytes each: 5,000 B
    assert list(paced_rows(iter(rows), None)) == rows
    began = time.monotonic()
    assert list(paced_rows(iter(rows), TaskShare(None, 10_000))) == rows
    assert time.monotonic() - began >= 0.5 * 0.95  # 5,000 B at 10,000 B/s
