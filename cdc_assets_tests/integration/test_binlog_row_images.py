"""Row images that are not full: a session may SET binlog_row_image=MINIMAL or NOBLOB although the server logs
FULL. Columns missing from an image keep their target value; an insert that lacks columns stops the sync."""
import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import SourceSetupError
from cdc_assets_tests.support import config_for, execute, fetch_rows, postgres_target, source_database

SEED = ["CREATE TABLE t (id INT PRIMARY KEY, a INT DEFAULT 5, s VARCHAR(20), b BLOB, txt TEXT)"]
ROWS = 12


@pytest.fixture
def task(servers, unique_name, tmp_path):
    """(runtime starting at the log end, source connection, target connection, database name)"""
    target = f"{unique_name}_tgt"
    tgt = postgres_target(servers, target)
    with source_database(servers, "mysql", unique_name, SEED) as src:
        config = config_for(tmp_path, servers, task_id="images", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target="postgres", target_db=target,
                            pipeline={"startup_mode": "latest"})
        rt = TaskRuntime(config)
        rt.sink.ensure_table(rt.source.describe(config.source.table_ids[0]))
        sync(rt, until_caught_up=True)  # the checkpoint: the log end, before any row
        try:
            yield rt, src, tgt, unique_name
        finally:
            rt.close()
    tgt.close()


def source_rows(src) -> list[tuple]:
    return fetch_rows(src, "t", "id")


@pytest.mark.parametrize("image", ["MINIMAL", "NOBLOB"])
def test_updates_and_deletes_with_a_partial_image_change_only_the_columns_logged(task, image):
    rt, src, tgt, db = task
    execute(src, "SET SESSION binlog_row_image = FULL",
            f"INSERT INTO t SELECT seq, seq * 10, CONCAT('s', seq), UNHEX(HEX(seq)), REPEAT('x', seq) "
            f"FROM seq_1_to_{ROWS}")
    execute(src, f"SET SESSION binlog_row_image = {image}",
            "UPDATE t SET a = a + 1 WHERE id <= 4",  # neither the blob nor the text is logged
            "UPDATE t SET s = NULL WHERE id = 2",  # a column set to NULL is logged, as NULL
            "UPDATE t SET b = x'beef' WHERE id = 3",  # a changed blob is logged
            "DELETE FROM t WHERE id = 5",
            "BEGIN", "UPDATE t SET txt = 'new' WHERE id = 6", "UPDATE t SET a = 0 WHERE id = 6", "COMMIT",
            f"INSERT INTO t VALUES ({ROWS + 1}, 1, 'all', x'00', 'columns')",  # every column given: a full image
            f"UPDATE t SET a = 7 WHERE id = {ROWS + 1}")

    sync(rt, until_caught_up=True)

    assert source_rows(src)[4] == (6, 0, "s6", b"\x06", "new")  # the test changes what it means to
    assert fetch_rows(tgt, f'"{db}".t', "id") == source_rows(src)


@pytest.mark.parametrize("image, change", [
    ("MINIMAL", "INSERT INTO t (id, s) VALUES (2, 'two')"),  # `a` takes its default 5: only the source knows it
    ("NOBLOB", "INSERT INTO t (id, a, s) VALUES (2, 2, 'two')"),  # blob and text left out
    ("MINIMAL", "UPDATE t SET id = 3 WHERE id = 1"),  # the new key's row: only `id` is logged
    ("NOBLOB", "UPDATE t SET id = 3 WHERE id = 1"),  # the new key's row: blob and text not logged
])
def test_a_row_the_image_cannot_rebuild_stops_the_sync_with_the_way_out(task, image, change):
    rt, src, tgt, db = task
    execute(src, "SET SESSION binlog_row_image = FULL", "INSERT INTO t VALUES (1, 1, 'one', x'01', 'text')")
    sync(rt, until_caught_up=True)
    execute(src, f"SET SESSION binlog_row_image = {image}", change)

    with pytest.raises(SourceSetupError) as caught:
        sync(rt, until_caught_up=True)

    message = str(caught.value)
    assert f"{db}.t" in message and "mysql-bin." in message  # the table and the position
    assert "binlog_row_image=FULL" in caught.value.hint
    assert fetch_rows(tgt, f'"{db}".t', "id") == [(1, 1, "one", b"\x01", "text")]  # nothing half-written
