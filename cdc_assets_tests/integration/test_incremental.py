"""The incremental phase on real servers: after the snapshot, every insert, update, delete and key change of
the source reaches the target (PostgreSQL or MariaDB); checkpoints follow the target's commits; unchanged TOAST
values survive."""
import secrets
from dataclasses import dataclass

import pymysql
import pytest

from cdc_assets.core.positions import is_before
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import SplitFailed
from cdc_assets.errors import ValueMisfit
from cdc_assets_tests.support import config_for, fetch_rows, run_transactions, snapshot_all, source_database

ROWS = 600
BIG = secrets.token_hex(40_000)  # incompressible, so TOASTed by PostgreSQL: an update of another column logs it as unchanged

MYSQL_SEED = [
    "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2), body LONGTEXT, flags BIT(4))",
    f"INSERT INTO items SELECT seq, CONCAT('item ', seq), seq / 3, NULL, b'0101' FROM seq_1_to_{ROWS}",
    "CREATE TABLE pairs (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b))",
    "INSERT INTO pairs VALUES (1, 'x', 1), (1, 'y', 2), (2, 'x', 3)",
]
# The schema is named after the test: in a MariaDB target it becomes a database, shared by every test.
POSTGRES_SEED = [
    "CREATE SCHEMA {ns}",
    "CREATE TABLE {ns}.items (id INT PRIMARY KEY, name VARCHAR(40), price NUMERIC(10,2), body TEXT, flags BIT(4))",
    f"INSERT INTO {{ns}}.items SELECT g, 'item ' || g, g / 3.0, NULL, B'0101' FROM generate_series(1, {ROWS}) g",
    "CREATE TABLE {ns}.pairs (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b))",
    "INSERT INTO {ns}.pairs VALUES (1, 'x', 1), (1, 'y', 2), (2, 'x', 3)",
]


@dataclass(frozen=True)
class Target:
    kind: str
    database: str  # of a PostgreSQL target; a MariaDB target's tables live in the database named like their namespace
    conn: object
    server: object


@pytest.fixture
def source(request, servers, unique_name):
    kind = request.param
    seed = MYSQL_SEED if kind == "mysql" else [s.format(ns=unique_name) for s in POSTGRES_SEED]
    with source_database(servers, kind, unique_name, seed) as conn:
        yield kind, unique_name, unique_name, conn


@pytest.fixture
def target(request, servers, mariadb_target, unique_name):
    """PostgreSQL, or the second MariaDB: into the source's own, a MySQL -> MySQL task would write into the very
    table it reads (a table keeps its namespace in the target)."""
    if request.param == "mysql":
        conn = mariadb_target.connect()
        yield Target("mysql", "", conn, mariadb_target)
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{unique_name}`")
        conn.close()
        return
    name = f"{unique_name}_tgt"
    servers.postgres.create_database(name)
    conn = servers.postgres.connect(name)
    yield Target("postgres", name, conn, None)
    conn.close()


def snapshot_task(tmp_path, servers, spark, source, target: Target, **sections) -> TaskRuntime:
    kind, db, ns, _ = source
    config = config_for(tmp_path, servers, task_id=f"inc_{db}"[:40], source=kind, source_db=db,
                        tables=[f"{ns}.items", f"{ns}.pairs"], target=target.kind, target_db=target.database,
                        target_server=target.server, snapshot={"split_size": 200}, **sections)
    rt = TaskRuntime(config)
    rt.adopt_spark(spark)
    snapshot_all(rt)
    return rt


def run(source, statements: list[str]) -> None:
    run_transactions(source[3], statements)


def rendered(conn, dialect: str, ns: str, table: str) -> list[tuple]:
    """The rows as the server renders them as text: MariaDB returns BIT as bytes and PostgreSQL as '0101', so
    both give the bit string; decimals as the server prints them, so '1.50' is not equal to '1.5'."""
    if table == "pairs":
        columns = "a, b, v"
    elif dialect == "mysql":
        columns = "id, name, CAST(price AS CHAR), body, LPAD(BIN(flags), 4, '0')"
    else:
        columns = "id, name, price::text, body, flags::text"
    table_sql = f"`{ns}`.`{table}`" if dialect == "mysql" else f'"{ns}"."{table}"'
    return fetch_rows(conn, f"(SELECT {columns} FROM {table_sql}) AS t", "1, 2" if table == "pairs" else "1")


def assert_same(source, target: Target) -> None:
    kind, _, ns, conn = source
    for table in ("items", "pairs"):
        want, got = rendered(conn, kind, ns, table), rendered(target.conn, target.kind, ns, table)
        assert got == want, f"{table}: {len(got)} rows in the target, {len(want)} in the source"


def changes(ns: str, bit: str) -> list[str]:
    return [
        f"INSERT INTO {ns}.items VALUES (1001, 'new', 1.50, NULL, {bit}'1111'); UPDATE {ns}.items SET price = 9.99 WHERE id <= 50",
        f"DELETE FROM {ns}.items WHERE id BETWEEN 100 AND 120; UPDATE {ns}.items SET name = 'renamed' WHERE id = 1001",
        f"UPDATE {ns}.items SET id = 5000 WHERE id = 300",  # a key change: old key deleted, new one inserted
        f"UPDATE {ns}.pairs SET b = 'z' WHERE a = 1 AND b = 'y'; DELETE FROM {ns}.pairs WHERE a = 2",
        f"INSERT INTO {ns}.items VALUES (2000, 'gone soon', 1, NULL, NULL); DELETE FROM {ns}.items WHERE id = 2000",
        f"UPDATE {ns}.items SET body = '{BIG}' WHERE id = 7",
        f"UPDATE {ns}.items SET name = 'toast kept' WHERE id = 7",  # body unchanged: PG sends no value for it
    ]


@pytest.mark.parametrize("target", ["postgres", "mysql"], indirect=True)
@pytest.mark.parametrize("source", ["mysql", "postgres"], indirect=True)
@pytest.mark.parametrize("resumer", [{"resume_type": "from_target"}, {"resume_type": "sqlite"}],
                         ids=["from_target", "sqlite"])
def test_sync_applies_every_change_and_checkpoints(tmp_path, servers, spark, source, target, resumer):
    kind, db, ns, conn = source
    rt = snapshot_task(tmp_path, servers, spark, source, target, resumer=resumer,
                       pipeline={"checkpoint_after_events": 25})
    try:
        run(source, changes(ns, "b" if kind == "mysql" else "B"))
        log_end = rt.source.current_position()  # after the last change committed
        first = sync(rt, until_caught_up=True)
        assert_same(source, target)
        assert first.events == 80  # 1+50, 21+1, 1, 1+1, 1+1, 1, 1
        assert first.batches >= 3 and first.ended == "caught up"
        checkpoint = rt.resumer.checkpoint()
        assert checkpoint is not None and checkpoint.position == first.checkpoint
        assert not is_before(checkpoint.position, log_end)  # every change committed before the run is covered

        run(source, [f"UPDATE {ns}.items SET price = price + 1 WHERE id BETWEEN 400 AND 420"])
        second = sync(rt, until_caught_up=True)
        assert second.events == 21 and second.start == str(first.checkpoint)
        assert_same(source, target)
        nothing = sync(rt, until_caught_up=True)
        assert nothing.events == 0
    finally:
        rt.close()
    if resumer["resume_type"] == "from_target":
        with target.conn.cursor() as cur:
            cur.execute("SELECT position_data FROM cdc_assets_meta.task_position WHERE resumer_type = 'CdcDoing' "
                        "AND task_id = %s", (rt.config.task_id,))
            assert cur.fetchone() is not None


@pytest.fixture
def lenient_target(mariadb_target):
    """The second MariaDB with an empty global sql_mode, as many installations run: out of range and invalid
    values are clipped or zeroed with a warning instead of refused. Restored afterwards."""
    conn = mariadb_target.connect()
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.sql_mode")
        [mode] = cur.fetchone()
        cur.execute("SET GLOBAL sql_mode = ''")
    try:
        yield conn
    finally:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL sql_mode = %s", (mode,))
        conn.close()


@pytest.mark.parametrize("path", ["snapshot", "log"])
def test_a_value_a_lenient_mysql_target_cannot_hold_stops_the_task(tmp_path, servers, spark, mariadb_target,
                                                                    lenient_target, unique_name, path):
    """An unconstrained NUMERIC lands as DECIMAL(65,30) (docs/connectors/postgres.md, "Type mapping"): 1e40 does not fit. The target
    refuses it whatever its sql_mode, naming the column, rather than storing 99999...9.999...9."""
    ns = unique_name
    big = f"INSERT INTO {ns}.wide VALUES (2, 1e40)"
    seed = [f"CREATE SCHEMA {ns}", f"CREATE TABLE {ns}.wide (id INT PRIMARY KEY, n NUMERIC)",
            f"INSERT INTO {ns}.wide VALUES (1, 1.5)", *([big] if path == "snapshot" else [])]
    with source_database(servers, "postgres", unique_name, seed) as conn:
        config = config_for(tmp_path, servers, task_id=f"wide_{ns}", source="postgres", source_db=unique_name,
                            tables=[f"{ns}.wide"], target="mysql", target_db="", target_server=mariadb_target)
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        try:
            # The snapshot: the target's own refusal; the log: the value checked before the batch is written.
            with pytest.raises((pymysql.err.DataError, SplitFailed, ValueMisfit),
                               match="Out of range value for column 'n'|column 'n' holds Decimal") as stopped:
                snapshot_all(rt)
                if path == "log":
                    with conn.cursor() as cur:
                        cur.execute(big)
                    sync(rt, until_caught_up=True)
            if path == "log":  # decimal(65,30) is the widest: no ALTER can be the way out
                assert stopped.value.hint.startswith("no column type of the target holds it"), stopped.value.hint
        finally:
            rt.close()
    try:
        written = fetch_rows(lenient_target, f"(SELECT id, CAST(n AS CHAR) FROM `{ns}`.wide) AS t", "1")
        # The failed split commits nothing; a failed batch leaves the snapshot's row as it was.
        assert written == ([] if path == "snapshot" else [(1, "1.500000000000000000000000000000")])
    finally:
        with lenient_target.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{ns}`")
