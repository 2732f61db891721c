"""Every type the planner accepts from a PostgreSQL source (sources/postgres/types.py: the mapped kinds, the types
carried as their text, and arrays of every mapped element type), one column each: the log writes each value (an
INSERT, an UPDATE of every column) as the very text the snapshot's copy renders, into both targets; into
PostgreSQL, as the source renders it too."""
import re

import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets_tests.integration.test_type_fidelity import target_conn, texts, through_the_log, with_id
from cdc_assets_tests.support import config_for, source_database

# declaration -> a value; each mapped base type also appears as an array of it.
SCALARS = {
    "boolean": "true", "smallint": "-32768", "integer": "2147483647", "bigint": "-9223372036854775808",
    "real": "1.17549435e-38", "double precision": "2.2250738585072014e-308",
    "text": r"E'a\\b\t\n\"''z'", "character varying(10)": "'xy '", "character(5)": "'ab'", "bytea": r"'\x00ff'",
    "date": "'2000-02-29'", "timestamp(3) without time zone": "'2000-01-01 00:00:00.123'",
    "timestamp(0) with time zone": "'2020-06-01 12:00:00+02'", "time(0) without time zone": "'23:59:59'",
    "interval": "'1 day -00:00:01.5'", "json": """'{"b": 1, "a": [1.50]}'""", "jsonb": """'{"b": 1, "a": [1.50]}'""",
    "uuid": "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "bit(3)": "B'101'", "bit varying(5)": "B'1'",
    "numeric": "0.00000000000000000001", "numeric(5,2)": "-123.45",
    "numeric(40,10)": "123456789012345678901234567890.0123456789",
}
AS_TEXT = {
    "money": "'12.34'", "inet": "'10.0.0.1'", "cidr": "'10.0.0.0/8'", "macaddr": "'08:00:2b:01:02:03'",
    "macaddr8": "'08:00:2b:01:02:03:04:05'", "tsvector": "'a:1 b'", "xml": "'<a x=\"1\"/>'", "hstore": "'a=>1'",
    "int4range": "'[1,2)'", "int8range": "'[1,9223372036854775807)'", "numrange": "'(1.5,2]'",
    "tsrange": "'[2000-01-01,2000-01-02)'", "tstzrange": "'[2000-01-01 00:00+00,2000-01-02 00:00+00)'",
    "daterange": "'[2000-01-01,2000-01-05)'", "geometry": "'SRID=4326;POINT(1 2)'", "geography": "'POINT(1 2)'",
}
ARRAYS = {
    "boolean[]": "'{t,f,NULL}'", "smallint[]": "'{1,NULL}'", "integer[]": "'{{1,2},{3,4}}'", "bigint[]": "'{-1}'",
    "real[]": "'{1.5,-0,0.1,2,1e6,123456,1.17549435e-38}'",
    "double precision[]": "'{1e308,0.1,2,-0,1e15,123456789012345,1e-5}'", "text[]": r"""E'{"a b","NULL",NULL,"\\\\"}'""",
    "character varying(4)[]": "'{x,\"\"}'", "character(2)[]": "'{ab,c}'", "bytea[]": r"""'{"\\x00ff"}'""",
    "date[]": "'{2000-02-29}'", "timestamp without time zone[]": "'{\"2000-01-01 00:00:00.5\"}'",
    "timestamp with time zone[]": "'{\"2000-01-01 00:00:00.5+02\"}'", "time without time zone[]": "'{12:00:00.25}'",
    "interval[]": "'{\"1 day\",\"-00:00:01\"}'", "json[]": r"""'{"{\"a\": 1}"}'""",
    "jsonb[]": r"""'{"{\"a\": 1}"}'""", "uuid[]": "'{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'",
    "bit(3)[]": "'{101}'", "bit varying[]": "'{1,01}'", "numeric[]": "'{1.50,-0.001}'",
}


def column_name(declaration: str) -> str:
    return "c_" + re.sub(r"\W+", "_", declaration.replace("[]", " array")).strip("_")


def seed() -> tuple[list[str], list[str]]:
    """DDL and rows: row 1 a value in every column; row 2 NULL in every other column, the values in the others."""
    declared = {**SCALARS, **AS_TEXT, **ARRAYS}
    columns = ", ".join(f"{column_name(d)} {d}" for d in declared)
    values = list(declared.values())
    rows = [f"(1, {', '.join(values)})",
            "(2, " + ", ".join("NULL" if i % 2 else v for i, v in enumerate(values)) + ")"]
    return ["CREATE SCHEMA app", "CREATE EXTENSION hstore", "CREATE EXTENSION postgis",
            f"CREATE TABLE app.walk (id INT PRIMARY KEY, {columns})"], rows


@pytest.mark.parametrize("target_kind", ["postgres", "mysql"])
def test_every_accepted_postgres_type_lands_alike_by_snapshot_and_log(tmp_path, servers, mariadb_target, spark,
                                                                       unique_name, target_kind):
    ddl, rows = seed()
    shifted = [with_id(rows[k % len(rows)], 201 + k - 1) for k in range(1, len(rows) + 1)]
    copies = [with_id(row, 301 + i) for i, row in enumerate(rows)]
    target_db = f"{unique_name}_to_{target_kind}"
    with source_database(servers, "postgres", unique_name,
                         [*ddl, "INSERT INTO app.walk VALUES " + ", ".join(rows + shifted + copies)]) as src:
        tgt = target_conn(servers, target_kind, target_db, mariadb_target)
        if target_kind == "postgres":
            with tgt.cursor() as cur:
                cur.execute("CREATE EXTENSION postgis")
        config = config_for(tmp_path, servers, task_id="pg_walk", source="postgres", source_db=unique_name,
                            tables=["app.walk"], target=target_kind, target_db=target_db,
                            target_server=mariadb_target if target_kind == "mysql" else None,
                            snapshot={"split_size": 2})
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        try:
            [tp] = ensure_plans(rt)
            snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
            through_the_log(src, "postgres", "app.walk", rows)
            sync(rt, until_caught_up=True)
        finally:
            rt.close()
        source = texts(src, "postgres", "app", "walk")
    written = texts(tgt, target_kind, "app", "walk")
    if target_kind == "mysql":
        with tgt.cursor() as cur:
            cur.execute("DROP TABLE app.walk")  # the namespace is shared with other tests on this server
    tgt.close()
    n = len(rows)
    differ = [f"row {i} ({via}) column {c}: {got!r}, the snapshot wrote {want!r}"
              for i in range(1, n + 1) for c, want in written[i].items() if c != "id"
              for via, j in (("insert", 100 + i), ("update", 200 + i), ("update", 300 + (i - 2) % n + 1))
              if (got := written[j][c]) != want]
    assert not differ, f"postgres->{target_kind}: the log wrote other text than the snapshot:\n" + "\n".join(differ)
    if target_kind == "postgres":
        assert written == source
