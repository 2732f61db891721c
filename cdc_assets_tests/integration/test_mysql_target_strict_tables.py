"""A MySQL/MariaDB target that demands a primary key on every table it creates (MySQL 8's sql_require_primary_key,
MariaDB's innodb_force_primary_key), and user-made target tables with invisible columns: MySQL 8's generated
invisible primary key (sql_generate_invisible_primary_key) is an invisible `my_row_id BIGINT UNSIGNED AUTO_INCREMENT`
primary key, which MariaDB's INVISIBLE columns reproduce exactly."""
from contextlib import contextmanager

import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import TableError
from cdc_assets_tests.support import config_for, snapshot_all, source_database

SEED = ["CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1), (2, 2), (3, 3), (4, 4)",
        "CREATE TABLE s (id VARCHAR(10) COLLATE utf8mb4_nopad_bin PRIMARY KEY, v INT)",
        "INSERT INTO s VALUES ('a', 1), ('A', 2), ('á', 3), ('a ', 4)"]
CHANGES = ["UPDATE t SET v = 20 WHERE id = 2", "DELETE FROM t WHERE id = 3", "INSERT INTO t VALUES (5, 5)",
           "UPDATE s SET v = 20 WHERE id = 'A'", "DELETE FROM s WHERE id = 'a '", "INSERT INTO s VALUES ('Á', 5)"]


@contextmanager
def global_setting(server, name: str, value: str):
    """SET GLOBAL for the test, DEFAULT again after: the sink's sessions are opened inside."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET GLOBAL {name} = {value}")
        yield conn
    finally:
        with conn.cursor() as cur:
            cur.execute(f"SET GLOBAL {name} = DEFAULT")
        conn.close()


def task(tmp_path, servers, target, spark, db: str, tables: list[str], **extra) -> TaskRuntime:
    rt = TaskRuntime(config_for(tmp_path, servers, task_id=f"mt_{db}", source="mysql", source_db=db,
                                tables=[f"{db}.{t}" for t in tables], target="mysql", target_db="",
                                target_server=target, snapshot={"split_size": 2}, **extra))
    rt.adopt_spark(spark)
    return rt


def run(rt: TaskRuntime, src, changes: list[str]) -> None:
    try:
        snapshot_all(rt)
        with src.cursor() as cur:
            for statement in changes:
                cur.execute(statement)
        sync(rt, until_caught_up=True)
    finally:
        rt.close()


def select(conn, sql: str) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return sorted(tuple(r) for r in cur.fetchall())


def test_full_task_into_a_target_that_forces_primary_keys(tmp_path, servers, mariadb_target, spark, unique_name):
    db = unique_name
    with global_setting(mariadb_target, "innodb_force_primary_key", "ON") as admin:
        try:
            with source_database(servers, "mysql", db, SEED) as src:
                rt = task(tmp_path, servers, mariadb_target, spark, db, ["t", "s"],
                          resumer={"resume_type": "from_target", "table_full_name": f"{db}_meta.pos"})
                run(rt, src, CHANGES)
                want = {t: select(src, f"SELECT id, v FROM {t}") for t in ("t", "s")}
            assert {t: select(admin, f"SELECT id, v FROM `{db}`.{t}") for t in ("t", "s")} == want
            with admin.cursor() as cur:  # every table the task made has a primary key; no staging table is left
                cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES t WHERE TABLE_SCHEMA IN "
                            "(%s, %s) AND NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS s WHERE "
                            "s.TABLE_SCHEMA = t.TABLE_SCHEMA AND s.TABLE_NAME = t.TABLE_NAME AND "
                            "s.INDEX_NAME = 'PRIMARY')", (db, f"{db}_meta"))
                assert cur.fetchall() == ()
                cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (db,))
                assert sorted(r[0] for r in cur.fetchall()) == ["s", "t"]
        finally:
            with admin.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
                cur.execute(f"DROP DATABASE IF EXISTS `{db}_meta`")


def test_target_table_with_invisible_columns_gets_every_row(tmp_path, servers, mariadb_target, spark, unique_name):
    db = unique_name
    mariadb_target.create_database(db)
    admin = mariadb_target.connect(db)
    try:
        with admin.cursor() as cur:
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT, "
                        "seq BIGINT INVISIBLE NOT NULL AUTO_INCREMENT UNIQUE, note VARCHAR(10) INVISIBLE DEFAULT 'x')")
        with source_database(servers, "mysql", db, SEED[:2]) as src:
            run(task(tmp_path, servers, mariadb_target, spark, db, ["t"]), src, CHANGES[:3])
            want = select(src, "SELECT id, v FROM t")
        assert select(admin, "SELECT * FROM t") == want  # SELECT * leaves invisible columns out
        extra = select(admin, "SELECT seq, note FROM t")
        assert len({seq for seq, _ in extra}) == len(want) and {note for _, note in extra} == {"x"}
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE `{db}`")
        admin.close()


def test_target_table_keyed_by_an_invisible_row_id_is_refused_until_the_key_is_unique(tmp_path, servers,
                                                                                        mariadb_target, spark,
                                                                                        unique_name):
    db = unique_name
    mariadb_target.create_database(db)
    admin = mariadb_target.connect(db)
    try:
        with admin.cursor() as cur:  # what MySQL 8.0.30+ makes of CREATE TABLE t (id INT NOT NULL, v INT) with GIPK on
            cur.execute("CREATE TABLE t (my_row_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT INVISIBLE PRIMARY KEY, "
                        "id INT NOT NULL, v INT)")
        with source_database(servers, "mysql", db, SEED[:2]) as src:
            rt = task(tmp_path, servers, mariadb_target, spark, db, ["t"])
            try:
                with pytest.raises(TableError, match=rf"target table {db}.t .* primary key \(my_row_id\).*") as err:
                    ensure_plans(rt)
                assert "ADD UNIQUE KEY (`id`)" in err.value.hint
            finally:
                rt.close()
            with admin.cursor() as cur:
                cur.execute("ALTER TABLE t ADD UNIQUE KEY (id)")
            run(task(tmp_path, servers, mariadb_target, spark, db, ["t"]), src, CHANGES[:3])
            want = select(src, "SELECT id, v FROM t")
        assert select(admin, "SELECT id, v FROM t") == want
        assert len(select(admin, "SELECT DISTINCT my_row_id FROM t")) == len(want)
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE `{db}`")
        admin.close()
