"""Keyed reads of the resumer: each read asks the position store for the records it needs by
(task_id, resumer_type, position_key) instead of loading every record of the task, in every placement."""
import sqlite3
from dataclasses import replace

import pytest

from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.splits import KeyRange, Split, SplitPhase
from cdc_assets.core.tables import TableId
from cdc_assets.resumer.logfile import PositionLog
from cdc_assets.resumer.records import CDC_DOING, CHECKPOINT_KEY, SNAPSHOT_DOING, SNAPSHOT_FINISHED, PositionRecord
from cdc_assets.resumer.resumer import Checkpoint, Resumer, SplitWatermarks
from cdc_assets.resumer.sqlite import TABLE, SqlitePositionStore
from cdc_assets.resumer.store import KEYS_PER_SELECT, selects

TABLE_ID = TableId("s", "t")
SPLITS = 2 * KEYS_PER_SELECT + 7  # a keyed read of all of them takes three statements


def split(i: int) -> Split:
    return Split(TABLE_ID, i, KeyRange(i * 10, i * 10 + 10), 10)


def task_records(task_id: str, rows_offset: int) -> list[PositionRecord]:
    return [*(PositionRecord(task_id, SNAPSHOT_FINISHED, split(i).id, {"type": "RdbSnapshotFinished",
                                                                      "rows": i + rows_offset})
              for i in range(SPLITS)),
            *(PositionRecord(task_id, SNAPSHOT_DOING, split(i).id, {"type": "RdbSnapshot", "reads": 1})
              for i in range(SPLITS))]


@pytest.fixture(params=["sqlite", "from_log"])
def resumer(request, tmp_path):
    """A resumer of task "t" whose store also holds every kind of record of task "u"."""
    log = PositionLog(tmp_path / "logs")
    store = SqlitePositionStore(tmp_path / "p.sqlite") if request.param == "sqlite" else log
    mine, other = Resumer("t", store, log, "mysql"), Resumer("u", store, log, "mysql")
    for r, offset, pos in ((mine, 0, 4), (other, 1000, 99)):
        r.record_committed(task_records(r.task_id, offset))
        r.record_committed(r.checkpoint_records(Checkpoint(MysqlPosition("b.000002", pos), 0, pos)))
        r.record_committed(r.schema_records(0, {}))
    yield mine
    mine.close()


def test_keyed_reads_return_exactly_the_records_asked_for(resumer):
    ids = [split(i).id for i in range(SPLITS)]
    asked = resumer.finished([ids[7], "s.t:9999"])
    assert list(asked) == [ids[7]] and asked[ids[7]].position_data["rows"] == 7  # task u's marker says 1007
    assert resumer.finished([]) == {}
    assert sorted(resumer.finished(ids)) == ids == sorted(resumer.finished())  # keys in chunks, or all of them
    assert resumer.checkpoint() == Checkpoint(MysqlPosition("b.000002", 4), 0, 4)
    assert resumer.schemas(0) == {} and resumer.schemas(1) is None


def test_record_low_counts_the_reads_of_its_own_splits_and_phases_are_split_phases(resumer):
    low = MysqlPosition("b.000002", 50)
    marks = [SplitWatermarks(split(3), "p1", low), SplitWatermarks(split(SPLITS), "p1", low)]
    reads = resumer.record_low(marks)
    assert reads == {split(3).id: 2, split(SPLITS).id: 1}

    def phases() -> list[SplitPhase]:
        doing = {r.position_key: r for r in resumer.store.load("t", SNAPSHOT_DOING, [m.split.id for m in marks])}
        return [SplitPhase(doing[m.split.id].position_data["phase"]) for m in marks]

    assert phases() == [SplitPhase.LOW_RECORDED] * 2
    resumer.record_high([replace(m, high=MysqlPosition("b.000002", 60)) for m in marks], reads)
    assert phases() == [SplitPhase.HIGH_RECORDED] * 2
    resumer.record_failed(marks[:1], reads, "the commit failed")
    assert phases() == [SplitPhase.FAILED, SplitPhase.HIGH_RECORDED]


def test_sqlite_keyed_reads_search_the_unique_index_instead_of_scanning_the_task(tmp_path):
    SqlitePositionStore(tmp_path / "p.sqlite").close()  # creates the position table
    conn = sqlite3.connect(tmp_path / "p.sqlite")

    def plan(sql: str, params: tuple) -> str:
        return " / ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))

    keyed = [*selects(TABLE, "?", "t", CDC_DOING, [CHECKPOINT_KEY]),
             *selects(TABLE, "?", "t", SNAPSHOT_FINISHED, [split(i).id for i in range(SPLITS)])]
    assert len(keyed) == 1 + 3
    for sql, params in keyed:  # each key found through the unique index, whatever else the task recorded
        assert "USING INDEX sqlite_autoindex_task_position_1 (task_id=? AND resumer_type=? AND position_key=?)" \
            in plan(sql, params), plan(sql, params)
    [(every, params)] = selects(TABLE, "?", "t", None, None)
    assert "(task_id=?)" in plan(every, params)  # what every read was before: every record of the task
    conn.close()
