"""INVISIBLE columns (MariaDB >= 10.3, MySQL >= 8.0.23) are real columns that `SELECT *` leaves out: the snapshot
must name them, and their values must arrive from the snapshot and from the binlog alike, in PostgreSQL and MariaDB
targets, with no visible column's value moved."""
import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets_tests.support import config_for, fetch_rows, snapshot_all, source_database

COLUMNS = "id, a, secret, b, tag"  # named: SELECT * would skip `secret` and `tag`
SEED = [
    "CREATE TABLE inv (id INT PRIMARY KEY, a VARCHAR(10), secret INT INVISIBLE, b INT, "
    "tag VARCHAR(5) INVISIBLE DEFAULT 'dflt')",
    "INSERT INTO inv (id, a, secret, b, tag) VALUES (1, 'one', 11, 100, 'x'), (2, 'two', NULL, 200, 'y')",
    "INSERT INTO inv VALUES (3, 'three', 300)",  # the implicit column list has no invisible column: defaults
]
CHANGES = [
    "INSERT INTO inv (id, a, secret, b) VALUES (4, 'four', 44, 400)",
    "UPDATE inv SET secret = 12, b = 101 WHERE id = 1",
    "UPDATE inv SET tag = 'z' WHERE id = 3",
    "DELETE FROM inv WHERE id = 2",
    "INSERT INTO inv VALUES (5, 'five', 500)",
]


@pytest.fixture(params=["postgres", "mysql"])
def target(request, servers, mariadb_target, unique_name):
    if request.param == "postgres":
        servers.postgres.create_database(f"{unique_name}_tgt")
        conn = servers.postgres.connect(f"{unique_name}_tgt")
        yield "postgres", f"{unique_name}_tgt", conn, None
        conn.close()
        return
    conn = mariadb_target.connect()
    yield "mysql", "", conn, mariadb_target
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{unique_name}`")
    conn.close()


def rows(conn, kind: str, db: str) -> list[tuple]:
    table = f"`{db}`.`inv`" if kind == "mysql" else f'"{db}"."inv"'
    return fetch_rows(conn, f"(SELECT {COLUMNS} FROM {table}) AS t", "1")


def test_invisible_columns_arrive_from_the_snapshot_and_the_log(tmp_path, servers, spark, unique_name, target):
    kind, target_db, tgt, target_server = target
    with source_database(servers, "mysql", unique_name, SEED) as src:
        config = config_for(tmp_path, servers, task_id=f"inv_{unique_name}", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.inv"], target=kind, target_db=target_db,
                            target_server=target_server)
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        try:
            snapshot_all(rt)
            assert rows(tgt, kind, unique_name) == rows(src, "mysql", unique_name)
            assert (1, "one", 11, 100, "x") in rows(tgt, kind, unique_name)
            with src.cursor() as cur:
                for statement in CHANGES:
                    cur.execute(statement)
            sync(rt, until_caught_up=True)
        finally:
            rt.close()
        want = rows(src, "mysql", unique_name)
    assert want == [(1, "one", 12, 101, "x"), (3, "three", None, 300, "z"), (4, "four", 44, 400, "dflt"),
                    (5, "five", None, 500, "dflt")]
    assert rows(tgt, kind, unique_name) == want
