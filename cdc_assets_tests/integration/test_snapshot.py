"""Snapshot of splits end to end on real servers: rows land exactly, finished splits are never re-read,
every resumer backend keeps the positions, and watermarks bracket concurrent writes truthfully."""
import json

import pytest

from cdc_assets.core.positions import is_before, position_from_json
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import PhaseHooks, TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets.resumer.logfile import FINISHED_LOG, POSITION_LOG
from cdc_assets_tests.support import config_for, fetch_rows, source_database

ROWS = 2500


MYSQL_SEED = [
    "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2), seen DATETIME(6))",
    f"INSERT INTO items SELECT seq, CONCAT('item ', seq), seq / 3, TIMESTAMP('2024-01-01') + INTERVAL seq MINUTE "
    f"FROM seq_1_to_{ROWS}",
]
POSTGRES_SEED = [
    "CREATE SCHEMA app",
    "CREATE TABLE app.items (id INT PRIMARY KEY, name VARCHAR(40), price NUMERIC(10,2), seen TIMESTAMP(6))",
    f"INSERT INTO app.items SELECT g, 'item ' || g, g / 3.0, TIMESTAMP '2024-01-01' + g * INTERVAL '1 minute' "
    f"FROM generate_series(1, {ROWS}) g",
]


@pytest.fixture
def source_table(request, servers, unique_name):
    """(db_type, database, table, connection) of a seeded source table."""
    kind = request.param
    seed, table = (MYSQL_SEED, f"{unique_name}.items") if kind == "mysql" else (POSTGRES_SEED, "app.items")
    with source_database(servers, kind, unique_name, seed) as conn:
        yield kind, unique_name, table, conn


def make_runtime(tmp_path, servers, spark, source_table, pg_target, resumer=None, hooks=None):
    kind, db, table, _ = source_table
    extra = {"resumer": resumer} if resumer else {}
    config = config_for(tmp_path, servers, task_id="snap_test", source=kind, source_db=db, tables=[table],
                        target="postgres", target_db=pg_target[0], snapshot={"split_size": 500}, **extra)
    rt = TaskRuntime(config, hooks)
    rt.adopt_spark(spark)
    return rt


def target_rows(pg_target, table):
    ns, name = table.split(".")
    return fetch_rows(pg_target[1], f'"{ns}"."{name}"', "id")


@pytest.mark.parametrize("source_table", ["mysql", "postgres"], indirect=True)
def test_snapshot_copies_every_row_exactly(tmp_path, servers, spark, source_table, pg_target):
    kind, db, table, conn = source_table
    rt = make_runtime(tmp_path, servers, spark, source_table, pg_target)
    try:
        [tp] = ensure_plans(rt)
        ids = [s.id for s in tp.plan.splits]
        results = snapshot_splits(rt, tp.plan.table, ids[:3]) + snapshot_splits(rt, tp.plan.table, ids[3:])
    finally:
        rt.close()
    assert sum(r.rows for r in results) == ROWS and not any(r.skipped for r in results)
    source_sql = f"`{db}`.items" if kind == "mysql" else "app.items"
    assert target_rows(pg_target, table) == fetch_rows(conn, source_sql, "id")


@pytest.mark.parametrize("source_table", ["mysql"], indirect=True)
@pytest.mark.parametrize("resumer", [
    {"resume_type": "sqlite"},
    {"resume_type": "from_target"},
    {"resume_type": "from_log"},
    "from_db",
])
def test_finished_splits_are_not_read_again(tmp_path, servers, spark, source_table, pg_target, resumer):
    if resumer == "from_db":
        resumer = {"resume_type": "from_db", "db_type": "mysql", "url": servers.mariadb.url(),
                   "table_full_name": f"cdc_meta.pos_{pg_target[0]}"}
    rt = make_runtime(tmp_path, servers, spark, source_table, pg_target, resumer)
    try:
        [tp] = ensure_plans(rt)
        ids = [s.id for s in tp.plan.splits]
        snapshot_splits(rt, tp.plan.table, ids[:2])
    finally:
        rt.close()

    rt = make_runtime(tmp_path, servers, spark, source_table, pg_target, resumer)  # as after a restart
    try:
        results = snapshot_splits(rt, tp.plan.table, ids)
        records = rt.resumer.records()
    finally:
        rt.close()
    assert [r.split_id for r in results if r.skipped] == ids[:2]
    doing = {r.position_key: r.position_data for r in records if r.resumer_type == "SnapshotDoing"}
    finished = {r.position_key: r.position_data for r in records if r.resumer_type == "SnapshotFinished"}
    assert set(finished) == set(ids)
    assert all(doing[i]["reads"] == 1 for i in ids)
    assert sum(f["rows"] for f in finished.values()) == ROWS
    # finished.log and position.log are written whatever the store, in ape-dts's line format.
    log_dir = rt.config.log_dir
    lines = (log_dir / FINISHED_LOG).read_text().splitlines()
    assert len(lines) == len(ids)
    stamp, data = lines[0].split(" | ", 1)
    assert json.loads(data)["type"] == "RdbSnapshotFinished" and len(stamp) == 26
    lows = [ln for ln in (log_dir / POSITION_LOG).read_text().splitlines() if '"LOW_RECORDED"' in ln]
    assert len(lows) == len(ids) and " | current_position | " in lows[0]


@pytest.mark.parametrize("source_table", ["mysql", "postgres"], indirect=True)
def test_watermarks_bracket_writes_made_during_the_read(tmp_path, servers, spark, source_table, pg_target):
    kind, db, table, conn = source_table
    src = f"`{db}`.items" if kind == "mysql" else "app.items"
    seen = {}

    def write_during_read(split_ids):
        if seen:  # the hook runs once per group of splits; write during the first read only
            return
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {src} SET name = 'changed' WHERE id = 10")
            cur.execute(f"DELETE FROM {src} WHERE id = 11")
            cur.execute(f"INSERT INTO {src} (id, name) VALUES ({ROWS + 1}, 'late')")
        seen["after_writes"] = rt.source.current_position()

    rt = make_runtime(tmp_path, servers, spark, source_table, pg_target, hooks=PhaseHooks(after_low=write_during_read))
    try:
        [tp] = ensure_plans(rt)
        snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
        finished = rt.resumer.finished()
    finally:
        rt.close()
    first_group = finished[tp.plan.splits[0].id].position_data
    low = position_from_json(first_group["low_watermark"])
    high = position_from_json(first_group["high_watermark"])
    assert is_before(low, seen["after_writes"]) and not is_before(high, seen["after_writes"])
    later = [r for r in finished.values() if position_from_json(r.position_data["low_watermark"]) != low]
    assert later, "the table must span more than one group of splits for this test to say anything"
    for record in later:  # later groups start after the writes: their low watermark says so
        assert not is_before(position_from_json(record.position_data["low_watermark"]), seen["after_writes"])


@pytest.mark.parametrize("source_table", ["mysql", "postgres"], indirect=True)
def test_snapshot_survives_a_concurrent_writer(tmp_path, servers, spark, source_table, pg_target):
    """A writer inserts, updates and deletes (ids divisible by 7, and new ids) for the whole snapshot:
    every split still finishes, rows the writer never touched arrive exactly, and each group's
    watermarks are ordered (low <= high)."""
    import threading

    kind, db, table, conn = source_table
    src = f"`{db}`.items" if kind == "mysql" else "app.items"
    writer_conn = servers.mariadb.connect(db) if kind == "mysql" else servers.postgres.connect(db)
    stop = threading.Event()
    writes = {"n": 0}

    def write_until_stopped():
        next_id = ROWS + 1
        with writer_conn.cursor() as cur:
            while not stop.is_set():
                victim = 7 * (1 + writes["n"] % (ROWS // 7))
                cur.execute(f"UPDATE {src} SET name = 'w{writes['n']}' WHERE id = {victim}")
                cur.execute(f"DELETE FROM {src} WHERE id = {victim + 7 * 3}")
                cur.execute(f"INSERT INTO {src} (id, name) VALUES ({next_id}, 'new')")
                next_id += 1
                writes["n"] += 1

    rt = make_runtime(tmp_path, servers, spark, source_table, pg_target)
    thread = threading.Thread(target=write_until_stopped)
    try:
        [tp] = ensure_plans(rt)
        thread.start()
        results = snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
        finished = rt.resumer.finished()
    finally:
        stop.set()
        thread.join()
        rt.close()
        writer_conn.close()
    assert writes["n"] > 0 and len(results) == len(tp.plan.splits) == len(finished)
    untouched = lambda rows: [r for r in rows if r[0] % 7 != 0 and r[0] <= ROWS]  # noqa: E731
    assert untouched(target_rows(pg_target, table)) == untouched(fetch_rows(conn, src, "id"))
    groups = sorted({(json.dumps(r.position_data["low_watermark"]), json.dumps(r.position_data["high_watermark"]))
                     for r in finished.values()})
    for low, high in groups:
        assert not is_before(position_from_json(json.loads(high)), position_from_json(json.loads(low)))
