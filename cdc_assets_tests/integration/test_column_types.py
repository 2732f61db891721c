"""Every column a source table has is classified at plan time: a type with no mapping stops the plan naming the
table, the column, the type and the way out (`source.exclude_columns`), before any value reaches Spark; excluded
columns stay out of the snapshot and the log."""
import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets.errors import CdcError, ConfigError, TableError, UnmappedType
from cdc_assets_tests.support import config_for, source_database

# A type each source has that no target maps: MariaDB's INET6 (its binlog carries 16 raw bytes), PostgreSQL's
# circle.
UNMAPPED = {"mysql": ("INET6", "'::1'", "'fe80::1'"), "postgres": ("CIRCLE", "'<(1,2),3>'", "'<(0,0),1>'")}


def seed(kind: str, table: str) -> list[str]:
    native, value, _ = UNMAPPED[kind]
    schema = [] if kind == "mysql" else ["CREATE SCHEMA app"]
    return schema + [f"CREATE TABLE {table} (id INT PRIMARY KEY, odd {native}, v VARCHAR(10))",
                     f"INSERT INTO {table} VALUES (1, {value}, 'a'), (2, NULL, 'b')"]


def runtime(tmp_path, servers, kind, db, table, target_db, **source_extra) -> TaskRuntime:
    config = config_for(tmp_path, servers, task_id="types_plan", source=kind, source_db=db, tables=[table],
                        target="postgres", target_db=target_db, source_extra=source_extra)
    return TaskRuntime(config)


@pytest.mark.parametrize("kind", ["mysql", "postgres"])
def test_a_type_without_mapping_stops_the_plan(tmp_path, servers, unique_name, kind):
    table = f"{unique_name}.t" if kind == "mysql" else "app.t"
    with source_database(servers, kind, unique_name, seed(kind, "t" if kind == "mysql" else table)):
        servers.postgres.create_database(f"{unique_name}_tgt")
        rt = runtime(tmp_path, servers, kind, unique_name, table, f"{unique_name}_tgt")
        try:
            with pytest.raises(UnmappedType) as refused:
                ensure_plans(rt)
        finally:
            rt.close()
    message = str(refused.value)
    assert f"column 'odd' of {table} has type {UNMAPPED[kind][0].lower()}" in message
    assert f"source.exclude_columns: {{{table}: [odd]}}" in message
    assert rt.plans.load(rt.config.source.table_ids[0]) is None


@pytest.mark.parametrize("kind", ["mysql", "postgres"])
def test_excluded_columns_stay_out_of_the_snapshot_and_the_log(tmp_path, servers, spark, unique_name, kind):
    table = f"{unique_name}.t" if kind == "mysql" else "app.t"
    source_sql = "t" if kind == "mysql" else table
    target_db = f"{unique_name}_tgt"
    _, _, other = UNMAPPED[kind]
    with source_database(servers, kind, unique_name, seed(kind, source_sql)) as src:
        servers.postgres.create_database(target_db)
        rt = runtime(tmp_path, servers, kind, unique_name, table, target_db, exclude_columns={table: ["odd"]})
        rt.adopt_spark(spark)
        try:
            [tp] = ensure_plans(rt)
            snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
            with src.cursor() as cur:
                cur.execute(f"INSERT INTO {source_sql} VALUES (3, {other}, 'c')")
                cur.execute(f"UPDATE {source_sql} SET odd = {other}, v = 'bb' WHERE id = 2")
                cur.execute(f"UPDATE {source_sql} SET odd = NULL WHERE id = 1")
            sync(rt, until_caught_up=True)
        finally:
            rt.close()
    tgt = servers.postgres.connect(target_db)
    with tgt.cursor() as cur:
        cur.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = 't' "
                    "ORDER BY ordinal_position", (table.split(".")[0],))
        assert [r[0] for r in cur.fetchall()] == ["id", "v"]
        cur.execute(f'SELECT id, v FROM "{table.split(".")[0]}".t ORDER BY id')
        assert cur.fetchall() == [(1, "a"), (2, "bb"), (3, "c")]
    tgt.close()


def test_exclude_columns_must_name_configured_tables_and_their_columns(tmp_path, servers, unique_name):
    with source_database(servers, "mysql", unique_name, seed("mysql", "t")):
        with pytest.raises(ConfigError, match=r"source.exclude_columns names tables not in source.tables: "
                                              r"\['x.y'\]"):
            runtime(tmp_path, servers, "mysql", unique_name, f"{unique_name}.t", "postgres",
                    exclude_columns={"x.y": ["odd"]})
        for column, refusal in (("nope", f"names column 'nope', which table {unique_name}.t does not have"),
                                ("id", f"names 'id', a key column of {unique_name}.t")):
            rt = runtime(tmp_path, servers, "mysql", unique_name, f"{unique_name}.t", "postgres",
                         exclude_columns={f"{unique_name}.t": [column, "odd"]})
            try:
                with pytest.raises(ConfigError, match=refusal):
                    ensure_plans(rt)
            finally:
                rt.close()


@pytest.mark.parametrize("path", ["snapshot", "log"])
def test_a_nul_in_mysql_text_stops_a_postgres_target_naming_the_row(tmp_path, servers, spark, unique_name, path):
    """docs/connectors/mysql.md, "Type mapping": PostgreSQL text cannot hold NUL (0x00). The snapshot and the log stop naming the row's
    key and the column, rather than dying in a Spark worker on the encoding error or dropping the character."""
    table, target_db = f"{unique_name}.t", f"{unique_name}_tgt"
    nul_row = "INSERT INTO t VALUES (7, 'fine', CONCAT('a', CHAR(0 USING utf8mb4), 'b'))"
    seed_rows = ["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), tx TEXT)", "INSERT INTO t VALUES (1, 'a', 'b')"]
    with source_database(servers, "mysql", unique_name, seed_rows + ([nul_row] if path == "snapshot" else [])) as src:
        servers.postgres.create_database(target_db)
        rt = runtime(tmp_path, servers, "mysql", unique_name, table, target_db)
        rt.adopt_spark(spark)
        refusal = rf"row \(7,\) of {table}: column 'tx' holds a NUL character \(0x00\), which PostgreSQL text cannot"
        try:
            [tp] = ensure_plans(rt)
            with pytest.raises(CdcError, match=refusal):
                snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
                with src.cursor() as cur:
                    cur.execute(nul_row)
                sync(rt, until_caught_up=True)
        finally:
            rt.close()
    tgt = servers.postgres.connect(target_db)
    with tgt.cursor() as cur:
        cur.execute(f'SELECT id FROM "{unique_name}".t ORDER BY id')
        assert cur.fetchall() == ([] if path == "snapshot" else [(1,)])
    tgt.close()


def test_an_extension_type_the_postgres_target_lacks_stops_the_plan(tmp_path, servers, unique_name):
    """PostgreSQL -> PostgreSQL declares each column as the source does: hstore needs the extension on the target."""
    seed_rows = ["CREATE SCHEMA app", "CREATE EXTENSION hstore",
                 "CREATE TABLE app.t (id INT PRIMARY KEY, hs HSTORE)", "INSERT INTO app.t VALUES (1, 'a=>b')"]
    with source_database(servers, "postgres", unique_name, seed_rows):
        servers.postgres.create_database(f"{unique_name}_tgt")
        rt = TaskRuntime(config_for(tmp_path, servers, task_id="types_plan", source="postgres", source_db=unique_name,
                                    tables=["app.t"], target="postgres", target_db=f"{unique_name}_tgt"))
        try:
            with pytest.raises(TableError, match=r"column 'hs' of app.t has type hstore, which .* does not know -- "
                                                 r"create it there first \(for an extension's type: CREATE EXTENSION"):
                ensure_plans(rt)
        finally:
            rt.close()


def test_mysql_spatial_values_land_in_postgis_with_their_srid(tmp_path, servers, spark, unique_name):
    """docs/connectors/mysql.md, "Type mapping": a target with PostGIS gets `geometry` columns, each value keeping its SRID, through
    the snapshot and the log (the binlog's MySQL form: a 4-byte SRID, then WKB)."""
    table, target_db = f"{unique_name}.t", f"{unique_name}_tgt"
    seed_rows = ["CREATE TABLE t (id INT PRIMARY KEY, g GEOMETRY, p POINT)",
                 "INSERT INTO t VALUES (1, ST_GeomFromText('LINESTRING(0 0,1 1.5)', 4326), ST_GeomFromText('POINT(1 2)')),"
                 " (2, ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1))', 3857), NULL), (3, NULL, NULL)"]
    with source_database(servers, "mysql", unique_name, seed_rows) as src:
        servers.postgres.create_database(target_db)
        tgt = servers.postgres.connect(target_db)
        with tgt.cursor() as cur:
            cur.execute("CREATE EXTENSION postgis")
        rt = runtime(tmp_path, servers, "mysql", unique_name, table, target_db)
        rt.adopt_spark(spark)
        try:
            [tp] = ensure_plans(rt)
            snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
            with src.cursor() as cur:
                cur.execute("INSERT INTO t VALUES (4, ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))', 4326),"
                            " ST_GeomFromText('POINT(-1.5e300 5e-324)', 4326))")
                cur.execute("UPDATE t SET p = ST_GeomFromText('POINT(3 4)', 2154) WHERE id = 2")
            sync(rt, until_caught_up=True)
        finally:
            rt.close()
        with src.cursor() as cur:
            cur.execute("SELECT id, ST_SRID(g), HEX(ST_AsBinary(g)), ST_SRID(p), HEX(ST_AsBinary(p)) FROM t ORDER BY id")
            expected = [tuple(v.lower() if isinstance(v, str) else v for v in row) for row in cur.fetchall()]
    with tgt.cursor() as cur:
        cur.execute(f"SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
                    f"'\"{unique_name}\".t'::regclass AND attname IN ('g', 'p')")
        assert [r[0] for r in cur.fetchall()] == ["geometry", "geometry"]
        cur.execute(f'SELECT id, ST_SRID(g), encode(ST_AsBinary(g), \'hex\'), ST_SRID(p), encode(ST_AsBinary(p), '
                    f'\'hex\') FROM "{unique_name}".t ORDER BY id')
        assert [tuple(row) for row in cur.fetchall()] == expected
    tgt.close()


def test_postgis_columns_keep_their_type_and_values_postgres_to_postgres(tmp_path, servers, spark, unique_name):
    seed_rows = ["CREATE SCHEMA app", "CREATE EXTENSION postgis",
                 "CREATE TABLE app.t (id INT PRIMARY KEY, g geometry(Point,4326), gg geography, gu geometry)",
                 "INSERT INTO app.t VALUES (1, 'SRID=4326;POINT(1 2)', 'POINT(3 4)', 'SRID=3857;LINESTRING(0 0,1 1)'),"
                 " (2, NULL, NULL, 'POLYGON((0 0,1 0,1 1,0 0))')"]
    target_db = f"{unique_name}_tgt"
    with source_database(servers, "postgres", unique_name, seed_rows) as src:
        servers.postgres.create_database(target_db)
        tgt = servers.postgres.connect(target_db)
        with tgt.cursor() as cur:
            cur.execute("CREATE EXTENSION postgis")
        rt = runtime(tmp_path, servers, "postgres", unique_name, "app.t", target_db)
        rt.adopt_spark(spark)
        try:
            [tp] = ensure_plans(rt)
            snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
            with src.cursor() as cur:
                cur.execute("INSERT INTO app.t VALUES (3, 'SRID=4326;POINT(-1.5e300 5e-324)', 'POINT(0 0)', NULL)")
                cur.execute("UPDATE app.t SET gu = 'SRID=2154;POINT(5 6)' WHERE id = 1")
            sync(rt, until_caught_up=True)
        finally:
            rt.close()
        query = ("SELECT id, g::text, gg::text, gu::text, format_type(a.atttypid, a.atttypmod) FROM app.t, pg_attribute a "
                 "WHERE a.attrelid = 'app.t'::regclass AND a.attname = 'g' ORDER BY id")
        with src.cursor() as cur:
            cur.execute(query)
            expected = cur.fetchall()
    with tgt.cursor() as cur:
        cur.execute(query)
        assert cur.fetchall() == expected and expected[0][4] == "geometry(Point,4326)" and len(expected) == 3
    tgt.close()


def test_postgis_columns_land_in_mysql_as_their_hex_ewkb(tmp_path, servers, spark, unique_name):
    """docs/connectors/postgres.md, "Type mapping": a MySQL target holds PostGIS values as PostGIS's text, hex EWKB (the SRID inside)."""
    seed_rows = ["CREATE SCHEMA app", "CREATE EXTENSION postgis",
                 "CREATE TABLE app.t (id INT PRIMARY KEY, g geometry(Point,4326), gg geography)",
                 "INSERT INTO app.t VALUES (1, 'SRID=4326;POINT(1 2)', 'POINT(3 4)'), (2, NULL, NULL)"]
    with source_database(servers, "postgres", unique_name, seed_rows) as src:
        config = config_for(tmp_path, servers, task_id="types_plan", source="postgres", source_db=unique_name,
                            tables=["app.t"], target="mysql", target_db=f"{unique_name}_to_mysql")
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        try:
            [tp] = ensure_plans(rt)
            snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
            with src.cursor() as cur:
                cur.execute("INSERT INTO app.t VALUES (3, 'SRID=4326;POINT(-1.5e300 5e-324)', 'POINT(0 0)')")
                cur.execute("UPDATE app.t SET gg = 'POINT(5 6)' WHERE id = 2")
            sync(rt, until_caught_up=True)
        finally:
            rt.close()
        with src.cursor() as cur:
            cur.execute("SELECT id, g::text, gg::text FROM app.t ORDER BY id")
            expected = cur.fetchall()
    tgt = servers.mariadb.connect("app")
    with tgt.cursor() as cur:
        cur.execute("SELECT id, g, gg FROM app.t ORDER BY id")
        assert cur.fetchall() == tuple(expected) and len(expected) == 3
        cur.execute("DROP TABLE app.t")  # the namespace is shared with other tests on this server
    tgt.close()
