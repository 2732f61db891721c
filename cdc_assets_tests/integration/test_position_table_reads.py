"""A resumer read in a position table on a database server (`from_db`; `from_target` is the same store) touches
the rows it asks for, whatever else the task recorded: counted by PostgreSQL's own table statistics."""
import time

from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.urls import DbUrl
from cdc_assets.resumer.logfile import PositionLog
from cdc_assets.resumer.records import SNAPSHOT_FINISHED, PositionRecord
from cdc_assets.resumer.resumer import Checkpoint, Resumer
from cdc_assets.resumer.sql import SqlPositionStore

SPLITS = 3000
TABLE = "cdc_assets_meta.task_position"


def tuples_read(conn) -> tuple[int, int]:
    """(scans, rows read by them) of the position table, sequential and by index, as the server counted them."""
    with conn.cursor() as cur:
        cur.execute("SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0), "
                    "coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables "
                    "WHERE schemaname = 'cdc_assets_meta' AND relname = 'task_position'")
        return cur.fetchone()


def test_a_resumer_read_touches_only_the_rows_it_asks_for(tmp_path, servers, unique_name):
    servers.postgres.create_database(unique_name)
    url = DbUrl.parse(servers.postgres.url(unique_name))
    stats = servers.postgres.connect(unique_name)
    stats.autocommit = True
    log = PositionLog(tmp_path / "logs")
    writer = Resumer("t", SqlPositionStore(url, TABLE, "from_db"), log, "mysql")
    writer.record_committed([PositionRecord("t", SNAPSHOT_FINISHED, f"s.t:{i:04d}", {"type": "RdbSnapshotFinished"})
                             for i in range(SPLITS)])
    checkpoint = Checkpoint(MysqlPosition("b.000002", 4), 0, 4)
    writer.record_committed([*writer.checkpoint_records(checkpoint), *writer.schema_records(0, {})])
    writer.close()

    def rows_touched(read):
        """What one read returns, and how many rows of the position table it read. A session reports its
        counts when it ends: wait for the scan count to move, then for the rows to settle."""
        before = tuples_read(stats)
        resumer = Resumer("t", SqlPositionStore(url, TABLE, "from_db"), log, "mysql")
        result = read(resumer)
        resumer.close()
        deadline = time.monotonic() + 30
        while tuples_read(stats)[0] == before[0] and time.monotonic() < deadline:
            time.sleep(0.1)
        after = tuples_read(stats)
        assert after[0] > before[0], "the server reported no scan of the position table"
        return result, after[1] - before[1]

    assert rows_touched(lambda r: r.checkpoint()) == (checkpoint, 1)
    assert rows_touched(lambda r: r.schemas(0)) == ({}, 1)
    assert rows_touched(lambda r: list(r.finished(["s.t:0042"]))) == (["s.t:0042"], 1)
    every, touched = rows_touched(lambda r: len(r.records()))  # the counter does see a whole-task read
    assert every == SPLITS + 2 and touched >= SPLITS + 2
    stats.close()
