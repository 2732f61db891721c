"""A snapshot into three targets (two PostgreSQL databases, one MariaDB database) reads the source once: MariaDB's
per-table statistics count the rows read, which a second read of the splits would double. Every target then
holds the source's rows, byte for byte."""
import pytest
import yaml

from cdc_assets.config import load_config
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets_tests.support import fetch_rows

pytestmark = pytest.mark.spark
ROWS = 3000


def rows_read(conn, database: str, table: str) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT COALESCE(SUM(ROWS_READ), 0) FROM information_schema.TABLE_STATISTICS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (database, table))
        return int(cur.fetchone()[0])


def test_one_read_for_three_targets(tmp_path, servers, mariadb_target, unique_name, spark):
    db = unique_name
    servers.mariadb.create_database(db)
    src = servers.mariadb.connect(db)
    with src.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40), body BLOB, "
                    "at DATETIME(6), doc JSON)")
        cur.execute(f"INSERT INTO t SELECT seq, seq * 7, CONCAT('n\\t', seq), UNHEX(HEX(seq)), "
                    f"'2024-02-29 12:00:00.000001' + INTERVAL seq SECOND, JSON_OBJECT('k', seq) FROM seq_1_to_{ROWS}")
        cur.execute("SET GLOBAL userstat = 1")
    for name in ("a", "b"):
        servers.postgres.create_database(f"{db}_{name}")
    raw = {
        "task_id": f"once_{db}",
        "source": {"db_type": "mysql", "url": servers.mariadb.url(), "tables": [f"{db}.t"]},
        "targets": [
            {"name": "pg_a", "db_type": "postgres", "url": servers.postgres.url(f"{db}_a")},
            {"name": "pg_b", "db_type": "postgres", "url": servers.postgres.url(f"{db}_b")},
            {"name": "maria", "db_type": "mysql", "url": mariadb_target.url()},
        ],
        "snapshot": {"split_size": 1000},
        "runtime": {"data_dir": str(tmp_path / "state")},
    }
    path = tmp_path / "once.yaml"
    path.write_text(yaml.safe_dump(raw))
    rt = TaskRuntime(load_config(path))
    rt.adopt_spark(spark)
    try:
        [plan] = [tp.plan for tp in ensure_plans(rt)]
        before = rows_read(src, db, "t")
        results = snapshot_splits(rt, plan.table, [s.id for s in plan.splits])
        read = rows_read(src, db, "t") - before
        assert ROWS <= read < 1.5 * ROWS, f"the source's rows were read {read / ROWS:.2f} times for three targets"
        assert {n: sum(int(r.targets[n].split()[1]) for r in results) for n in ("pg_a", "pg_b", "maria")} == \
            {"pg_a": ROWS, "pg_b": ROWS, "maria": ROWS}
        # Materialized again: every target finished every split, nothing is read.
        again = snapshot_splits(rt, plan.table, [s.id for s in plan.splits])
        assert all(r.skipped for r in again) and rows_read(src, db, "t") - before == read
    finally:
        rt.close()
    want = fetch_rows(src, "t", "id")
    for name in ("a", "b"):
        conn = servers.postgres.connect(f"{db}_{name}")
        with conn.cursor() as cur:
            cur.execute(f'SELECT id, v, note, body, at, doc::text FROM "{db}".t ORDER BY id')
            got = [(i, v, n, bytes(b), a, d) for i, v, n, b, a, d in cur.fetchall()]
        conn.close()
        assert [(i, v, n, b, a) for i, v, n, b, a, _ in got] == [r[:5] for r in want], f"pg_{name} differs"
        assert all('"k"' in d for *_, d in got)
    conn = mariadb_target.connect()
    try:
        assert fetch_rows(conn, f"`{db}`.t", "id") == want, "maria differs"
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE `{db}`")
    finally:
        conn.close()
        with src.cursor() as cur:
            cur.execute(f"DROP DATABASE `{db}`")
        src.close()


def test_the_first_target_down_leaves_the_other_targets_connections_alone(tmp_path, servers, mariadb_target,
                                                                        unique_name):
    """The first target's runtime is also the task's: its connections closing when it is down must not close
    the other targets' (they may be committing on their own threads)."""
    from cdc_assets.engine.target_down import answering
    from cdc_assets_tests.support import three_targets

    rt = TaskRuntime(load_config(three_targets(tmp_path, servers, mariadb_target, unique_name, f"down_{unique_name}")))
    try:
        first, second, third = rt.lanes
        sinks = (second.sink, third.sink)

        def read(lane):
            if lane is first:
                raise OSError("Connection refused")
            with lane.sink.catalog() as cur:
                cur.execute("SELECT 1")
                return cur.fetchone()[0]

        found, down = answering(rt.lanes, read)
        assert set(found) == {"pg_b", "maria"} and set(down) == {"pg_a"}
        assert (second.sink, third.sink) == sinks, "a target down closed the other targets' connections"
        assert answering([second, third], read)[0] == {"pg_b": 1, "maria": 1}
    finally:
        rt.close()
