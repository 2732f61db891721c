"""Split planning against real servers: even integer splits, next-boundary splits for other keys,
composite keys never cut inside a first-column value, and refusals at plan time."""
import pytest

from cdc_assets.core.keys import range_predicate
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import SourceSetupError, TableError, UnreachableError
from cdc_assets_tests.support import config_for


@pytest.fixture
def mysql_db(servers, unique_name):
    servers.mariadb.create_database(unique_name)
    conn = servers.mariadb.connect(unique_name)
    yield unique_name, conn
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{unique_name}`")
    conn.close()


def runtime_for(tmp_path, servers, db, tables, split_size, **extra):
    config = config_for(tmp_path, servers, task_id="plan_test", source="mysql", source_db=db, tables=tables,
                        target="postgres", target_db="postgres", snapshot={"split_size": split_size}, **extra)
    return TaskRuntime(config)


def plan(tmp_path, servers, db, tables, split_size, **extra):
    """ensure_plans on a fresh runtime, closed afterwards whatever happens."""
    rt = runtime_for(tmp_path, servers, db, tables, split_size, **extra)
    try:
        return ensure_plans(rt)
    finally:
        rt.close()


def covered_counts(conn, db, table, plan):
    """Rows per split, counted by the source with the very predicates the snapshot sends."""
    counts = []
    with conn.cursor() as cur:
        for s in plan.splits:
            pred = range_predicate(f"`{plan.split_column}`", s.range, plan.key_kind, "mysql")
            cur.execute(f"SELECT COUNT(*) FROM `{db}`.`{table}` WHERE {pred}")
            counts.append(cur.fetchone()[0])
    return counts


def test_dense_integer_keys_split_evenly(tmp_path, servers, mysql_db):
    db, conn = mysql_db
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO t SELECT seq, seq FROM seq_1_to_1000")
    [tp] = plan(tmp_path, servers, db, [f"{db}.t"], 100)
    splits = tp.plan.splits
    assert tp.plan.key_kind == "int" and splits[-1].range.end is None and splits[0].range.start is None
    # The step comes from InnoDB's row estimate, which a background statistics update can move by a few percent
    # (seen: 995 for 1,000 rows, so steps of 101): the splits are even within that, and cover every row once.
    counts = covered_counts(conn, db, "t", tp.plan)
    assert sum(counts) == 1000 and len(counts) in (10, 11)
    assert all(90 <= c <= 110 for c in counts[:-1]) and 0 < counts[-1] <= 110


def test_string_keys_split_by_next_boundary_queries(tmp_path, servers, mysql_db):
    db, conn = mysql_db
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE s (code VARCHAR(40) PRIMARY KEY, v INT)")
        # Quotes and backslashes in keys exercise the literals the Spark predicates carry.
        cur.execute("INSERT INTO s SELECT CONCAT(CHAR(65 + seq % 26), 'o''k\\\\', seq), seq FROM seq_1_to_1037")
    [tp] = plan(tmp_path, servers, db, [f"{db}.s"], 100)
    counts = covered_counts(conn, db, "s", tp.plan)
    assert tp.plan.key_kind == "string"
    assert sum(counts) == 1037 and max(counts) <= 100 and len(counts) == 11


def test_composite_key_with_long_runs_of_first_column_is_never_cut(tmp_path, servers, mysql_db):
    db, conn = mysql_db
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE c (a VARCHAR(8), b INT, v INT, PRIMARY KEY (a, b))")
        # 'big' has 250 rows, more than a split holds; the rest are groups of three.
        cur.execute("INSERT INTO c SELECT 'big', seq, seq FROM seq_1_to_250")
        cur.execute("INSERT INTO c SELECT CONCAT('k', seq DIV 3), seq, seq FROM seq_1_to_300")
    [tp] = plan(tmp_path, servers, db, [f"{db}.c"], 100)
    assert sum(covered_counts(conn, db, "c", tp.plan)) == 550
    with conn.cursor() as cur:
        for s in tp.plan.splits:
            cur.execute(f"SELECT COUNT(*) FROM c WHERE {range_predicate('a', s.range, 'string', 'mysql')} AND a = 'big'")
            assert cur.fetchone()[0] in (0, 250)


def test_existing_plan_is_kept_not_replanned(tmp_path, servers, mysql_db):
    db, conn = mysql_db
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO t SELECT seq FROM seq_1_to_300")
    rt = runtime_for(tmp_path, servers, db, [f"{db}.t"], 100)
    try:
        [first] = ensure_plans(rt)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO t SELECT seq FROM seq_301_to_5000")
            cur.execute("ANALYZE TABLE t")
            cur.fetchall()
        [again] = ensure_plans(rt)
        [fresh] = ensure_plans(rt, replan=True)
    finally:
        rt.close()
    assert first.created and not again.created and again.plan == first.plan
    assert fresh.created and len(fresh.plan.splits) > len(first.plan.splits)


def test_table_without_primary_key_needs_a_unique_split_column(tmp_path, servers, mysql_db):
    db, conn = mysql_db
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE nopk (code VARCHAR(10) NOT NULL, v INT, UNIQUE KEY (code))")
        cur.execute("CREATE TABLE nopk2 (v INT)")
    with pytest.raises(TableError, match=rf"{db}.nopk has no primary key.*split_columns"):
        plan(tmp_path, servers, db, [f"{db}.nopk"], 100)
    [tp] = plan(tmp_path, servers, db, [f"{db}.nopk"], 100, source_extra={"split_columns": {f"{db}.nopk": "code"}})
    assert tp.schema.primary_key == ("code",)
    with pytest.raises(TableError, match="NOT NULL and carry a unique index"):
        plan(tmp_path, servers, db, [f"{db}.nopk2"], 100, source_extra={"split_columns": {f"{db}.nopk2": "v"}})


def test_missing_table_is_refused_by_name(tmp_path, servers, mysql_db):
    db, _ = mysql_db
    with pytest.raises(TableError, match=rf"table {db}.ghost does not exist"):
        plan(tmp_path, servers, db, [f"{db}.ghost"], 100)


def test_binlog_row_image_not_full_is_refused(tmp_path, servers, mysql_db):
    db, conn = mysql_db
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        cur.execute("SET GLOBAL binlog_row_image = 'MINIMAL'")
    try:
        with pytest.raises(SourceSetupError, match="binlog_row_image is MINIMAL"):
            plan(tmp_path, servers, db, [f"{db}.t"], 100)
    finally:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL binlog_row_image = 'FULL'")


def test_unreachable_server_names_the_masked_url(tmp_path):
    from cdc_assets.config import parse_config
    from cdc_assets.dev.processes import free_port

    config = parse_config({
        "task_id": "t",
        "source": {"db_type": "mysql", "url": f"mysql://cdc:pw-secret@127.0.0.1:{free_port()}", "tables": ["a.b"]},
        "target": {"db_type": "postgres", "url": "postgresql://x@127.0.0.1:1/y"},
    }, tmp_path)
    rt = TaskRuntime(config)
    with pytest.raises(UnreachableError) as err:
        ensure_plans(rt)
    assert "cannot connect to mysql://cdc:***@127.0.0.1" in str(err.value)
    assert "pw-secret" not in str(err.value)
