"""What bounds memory and statement size under a huge transaction: the read-ahead queue counts row changes,
and PostgreSQL statements are cut by rows and by bytes. And what the queue tells the batches: drained or not."""
import threading
from dataclasses import dataclass

from cdc_assets.engine import prefetch as prefetch_module
from cdc_assets.engine.prefetch import prefetch
from cdc_assets.sinks import postgres_apply

BUDGET, SIZE, ITEMS = 50, 10, 30


@dataclass
class Part:
    changes: list


def test_read_ahead_stops_at_its_change_budget(monkeypatch):
    monkeypatch.setattr(prefetch_module, "QUEUE_CHANGES", BUDGET)
    produced, full = 0, threading.Event()

    def items():
        nonlocal produced
        for _ in range(ITEMS):
            if produced == BUDGET:
                full.set()  # asked for one more after filling the budget: the reader ran ahead that far
            produced += SIZE
            yield Part([0] * SIZE)

    consumed = 0
    reader = prefetch(items(), lambda: None)
    assert full.wait(30), "the reader never filled its budget"
    try:
        for item in reader:
            consumed += len(item.changes)
            # Queued changes stay within the budget; one more item may wait in the reader's hand.
            assert produced - consumed <= BUDGET + SIZE
    finally:
        reader.close()
    assert consumed == ITEMS * SIZE


def test_a_single_item_larger_than_the_budget_still_passes(monkeypatch):
    monkeypatch.setattr(prefetch_module, "QUEUE_CHANGES", BUDGET)
    reader = prefetch(iter([Part([0] * (3 * BUDGET)), Part([0])]), lambda: None)
    try:
        assert [len(p.changes) for p in reader] == [3 * BUDGET, 1]
    finally:
        reader.close()


def test_postgres_statements_are_cut_by_rows_and_by_bytes(monkeypatch):
    monkeypatch.setattr(postgres_apply, "PAGE_ROWS", 3)
    monkeypatch.setattr(postgres_apply, "PAGE_BYTES", 100)
    assert [len(p) for p in postgres_apply._pages([(1, "a" * 10)] * 7)] == [3, 3, 1]
    # bytea travels as hex: 30 bytes count 60; a row over the budget goes alone
    assert [len(p) for p in postgres_apply._pages([(b"x" * 30,)] * 3 + [("y" * 500,), (2,)])] == [1, 1, 1, 1, 1]
    assert postgres_apply._pages([]) == []


def test_drained_says_whether_the_reader_has_an_item_and_keeps_its_order():
    second = threading.Event()

    def items():
        yield Part([1])
        second.wait(30)
        yield Part([2])

    reader = prefetch(items(), lambda: None)
    try:
        assert next(reader).changes == [1]
        assert reader.drained()  # the reader waits for the log
        second.set()
        assert not reader.drained(30)  # waited for the next item, which stays the next one
        assert not reader.drained()
        assert [p.changes for p in reader] == [[2]]
    finally:
        reader.close()
