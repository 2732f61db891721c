"""A large log batch reaches a PostgreSQL target through COPY (sinks/copy_rows.py): full rows replace the rows under
their keys, deleted keys go, and the table ends as the VALUES statements leave it, whether or not the target table
has a unique index INSERT ... ON CONFLICT can use, and for a table whose columns are all key. Rows of one batch
that swap the values of another unique column still apply (DELETE + INSERT then, not ON CONFLICT)."""
import pytest

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.sinks import postgres as postgres_sink
from cdc_assets.sinks.postgres import PostgresSink

TABLE = TableId("app", "items")
SCHEMA = TableSchema(TABLE, (Column("id", Kind.INT, "bigint"), Column("k", Kind.STRING, "text"),
                             Column("v", Kind.STRING, "text"), Column("n", Kind.INT, "integer")), ("id", "k"))
KEY_ONLY = TableSchema(TABLE, (Column("id", Kind.INT, "bigint"), Column("k", Kind.STRING, "text")), ("id", "k"))
KEYS = {  # the target's key, as an existing table may declare it: (in the table, after it)
    "primary key": (", PRIMARY KEY (id, k)", ""),
    "none": ("", ""),
    "unique index": ("", "CREATE UNIQUE INDEX ON app.items (k, id)"),
    "partial unique index": ("", "CREATE UNIQUE INDEX ON app.items (id, k) WHERE id > 0"),
    "deferrable unique": (", UNIQUE (id, k) DEFERRABLE INITIALLY DEFERRED", ""),
    "index on more columns": ("", "CREATE UNIQUE INDEX ON app.items (id, k, length(k))"),
}
FIRST = {"id": "g", "k": "'k' || g", "v": "'old'", "n": "0"}  # rows 0..299 before the batch


def changes(schema: TableSchema) -> TableChanges:
    """Rows 0..299 exist with n = 0: keys 0..99 get new rows, 100..149 are deleted, 300..349 are new."""
    names = [c.name for c in schema.columns]
    full = {"v": "tab\there \\N", "n": 1}
    rows = {(i, f"k{i}"): {n: {"id": i, "k": f"k{i}", **full}[n] for n in names}
            for i in [*range(100), *range(300, 350)]}
    rows[(7, "k7")] = {n: {"id": 7, "k": "k7", "v": None, "n": None}[n] for n in names}
    return TableChanges(TABLE, rows=rows, deletes={(i, f"k{i}") for i in range(100, 150)})


def applied(sink: PostgresSink, conn, schema: TableSchema, key: str) -> list[tuple]:
    names = ", ".join(c.name for c in schema.columns)
    inside, after = KEYS[key]
    with conn.cursor() as cur:
        cur.execute("DROP SCHEMA IF EXISTS app CASCADE")
        cur.execute(f"CREATE SCHEMA app; CREATE TABLE app.items "
                    f"({', '.join(f'{c.name} {c.native}' for c in schema.columns)}{inside}); {after}")
        cur.execute(f"INSERT INTO app.items ({names}) SELECT {', '.join(FIRST[c.name] for c in schema.columns)} "
                    "FROM generate_series(0, 299) g")
    with sink.transaction() as cur:
        sink.apply_changes(cur, schema, changes(schema))
    with conn.cursor() as cur:
        cur.execute(f"SELECT {names} FROM app.items ORDER BY id, k")
        return cur.fetchall()


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("schema", [SCHEMA, KEY_ONLY], ids=["with values", "key only"])
def test_copy_applies_a_batch_as_values_statements_do(servers, pg_target, monkeypatch, key, schema):
    name, conn = pg_target
    sink = PostgresSink(DbUrl.parse(servers.postgres.url(name)), "postgres")
    try:
        monkeypatch.setattr(postgres_sink, "COPY_MIN_ROWS", 10**9)
        by_values = applied(sink, conn, schema, key)
        monkeypatch.setattr(postgres_sink, "COPY_MIN_ROWS", 1)
        by_copy = applied(sink, conn, schema, key)
        with sink.transaction() as cur:  # what decided between ON CONFLICT and DELETE + INSERT
            assert sink._upserts(cur, schema) == (key in ("primary key", "unique index"))
    finally:
        sink.close()
    assert by_copy == by_values
    assert len(by_copy) == 300 - 50 + 50
    if len(schema.columns) > 2:
        assert by_copy[7] == (7, "k7", None, None) and by_copy[8] == (8, "k8", "tab\there \\N", 1)
        assert by_copy[100] == (150, "k150", "old", 0) and by_copy[-1] == (349, "k349", "tab\there \\N", 1)


@pytest.mark.parametrize("copy", [False, True], ids=["values", "copy"])
@pytest.mark.parametrize("unique_v", [False, True], ids=["key only unique", "another unique column"])
def test_rows_swapping_a_unique_column_apply(servers, pg_target, monkeypatch, copy, unique_v):
    name, conn = pg_target
    schema = TableSchema(TABLE, (Column("id", Kind.INT, "bigint"), Column("v", Kind.STRING, "text")), ("id",))
    with conn.cursor() as cur:
        cur.execute(f"CREATE SCHEMA app; CREATE TABLE app.items (id bigint PRIMARY KEY, v text{' UNIQUE' * unique_v})")
        cur.execute("INSERT INTO app.items VALUES (1, 'a'), (2, 'b')")
    monkeypatch.setattr(postgres_sink, "COPY_MIN_ROWS", 1 if copy else 10**9)
    sink = PostgresSink(DbUrl.parse(servers.postgres.url(name)), "postgres")
    try:
        with sink.transaction() as cur:
            assert sink._upserts(cur, schema) is not unique_v
            sink.apply_changes(cur, schema, TableChanges(TABLE, rows={(1,): {"id": 1, "v": "b"}, (2,): {"id": 2, "v": "a"}}))
    finally:
        sink.close()
    with conn.cursor() as cur:
        cur.execute("SELECT id, v FROM app.items ORDER BY id")
        assert cur.fetchall() == [(1, "b"), (2, "a")]
