"""A large log batch reaches a PostgreSQL target through COPY (sinks/copy_rows.py): full rows replace the rows under
their keys, deleted keys go, and the table ends as the VALUES statements leave it, whether or not the target table
has a unique index INSERT ... ON CONFLICT can use, and for a table whose columns are all key. Rows of one batch
that swap the values of another unique column still apply (DELETE + INSERT then, not ON CONFLICT). Fresh rows (a
batch's first change of their key was an INSERT) go by COPY straight into the table only where a key already
there stops that COPY: then those rows are applied as the others are."""
import pytest

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.positions import PgPosition
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.sinks import postgres_apply
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
    """Rows 0..299 exist with n = 0: keys 0..99 get new rows, 100..149 are deleted, 300..349 are new. Keys 0..9 are
    fresh as a replayed INSERT's are (the target holds them already), 300..349 as a new INSERT's."""
    names = [c.name for c in schema.columns]
    full = {"v": "tab\there \\N", "n": 1}
    rows = {(i, f"k{i}"): {n: {"id": i, "k": f"k{i}", **full}[n] for n in names}
            for i in [*range(100), *range(300, 350)]}
    rows[(7, "k7")] = {n: {"id": 7, "k": "k7", "v": None, "n": None}[n] for n in names}
    return TableChanges(TABLE, rows=rows, deletes={(i, f"k{i}") for i in range(100, 150)},
                        fresh={(i, f"k{i}") for i in [*range(10), *range(300, 350)]})


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
        monkeypatch.setattr(postgres_apply, "COPY_MIN_ROWS", 10**9)
        by_values = applied(sink, conn, schema, key)
        monkeypatch.setattr(postgres_apply, "COPY_MIN_ROWS", 1)
        by_copy = applied(sink, conn, schema, key)
        with sink.transaction() as cur:  # what decided between ON CONFLICT and DELETE + INSERT
            assert sink.lookups.upserts(cur, schema) == (key in ("primary key", "unique index"))
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
    monkeypatch.setattr(postgres_apply, "COPY_MIN_ROWS", 1 if copy else 10**9)
    sink = PostgresSink(DbUrl.parse(servers.postgres.url(name)), "postgres")
    try:
        with sink.transaction() as cur:
            assert sink.lookups.upserts(cur, schema) is not unique_v
            sink.apply_changes(cur, schema, TableChanges(TABLE, rows={(1,): {"id": 1, "v": "b"}, (2,): {"id": 2, "v": "a"}}))
    finally:
        sink.close()
    with conn.cursor() as cur:
        cur.execute("SELECT id, v FROM app.items ORDER BY id")
        assert cur.fetchall() == [(1, "b"), (2, "a")]


def copies_fresh(sink: PostgresSink, schema: TableSchema) -> bool:
    sink.lookups.forget(schema.table)
    with sink.transaction() as cur:
        return sink.lookups.upserts(cur, schema) and sink.lookups.copies_fresh(cur, schema, sink.batches.types(schema))


@pytest.mark.parametrize("replay, over_snapshot", [(False, False), (True, False), (True, True)],
                         ids=["new keys", "keys the target holds", "replaying over the snapshot"])
def test_fresh_rows_go_straight_into_the_table_unless_a_key_is_there(servers, pg_target, monkeypatch, replay,
                                                                      over_snapshot):
    name, conn = pg_target
    with conn.cursor() as cur:
        cur.execute("CREATE SCHEMA app; CREATE TABLE app.items (id bigint, k text, v text, n integer, "
                    "PRIMARY KEY (id, k))")
        cur.execute("INSERT INTO app.items SELECT g, 'k' || g, 'old', 0 FROM generate_series(0, 299) g")
        if replay:  # an earlier attempt at the batch committed its new rows, not its checkpoint
            cur.execute("INSERT INTO app.items SELECT g, 'k' || g, 'old', 0 FROM generate_series(300, 349) g")
    copies = []
    copied_into = postgres_apply.copied_into
    monkeypatch.setattr(postgres_apply, "copied_into", lambda *a: copies.append(copied_into(*a)) or copies[-1])
    monkeypatch.setattr(postgres_apply, "COPY_MIN_ROWS", 1)
    sink = PostgresSink(DbUrl.parse(servers.postgres.url(name)), "postgres")
    try:
        batch = changes(SCHEMA)
        batch.fresh = {(i, f"k{i}") for i in range(300, 350)}
        batch.replaying_until = PgPosition(1 << 40) if over_snapshot else None  # not even tried then
        sink.prepare_changes(SCHEMA, batch)
        with sink.transaction() as cur:
            sink.apply_changes(cur, SCHEMA, batch)
    finally:
        sink.close()
    assert copies == ([] if over_snapshot else [not replay])
    with conn.cursor() as cur:
        cur.execute("SELECT id, k, v, n FROM app.items WHERE id >= 300 ORDER BY id")
        assert cur.fetchall() == [(i, f"k{i}", "tab\there \\N", 1) for i in range(300, 350)]
        cur.execute("SELECT COUNT(*), COUNT(*) FILTER (WHERE n = 1) FROM app.items")
        assert cur.fetchone() == (300, 149)  # key 7 gets a NULL n


COLUMNS = "id bigint, k text, v text, n integer"


@pytest.mark.parametrize("ddl, copies", [
    (f"CREATE TABLE app.items ({COLUMNS}, PRIMARY KEY (id, k))", True),
    (f"CREATE TABLE app.items ({COLUMNS}, extra text DEFAULT 'x', PRIMARY KEY (id, k))", True),
    ("CREATE TABLE app.items (id bigint, k text, v varchar(10), n integer, PRIMARY KEY (id, k))", False),  # CAST cuts
    ("CREATE TABLE app.items (id bigint, k text, v text, n bigint, PRIMARY KEY (id, k))", False),
    (f"CREATE TABLE app.items ({COLUMNS})", False),  # no key to stop a replayed row
    (f"CREATE TABLE app.items ({COLUMNS}, PRIMARY KEY (id, k)) PARTITION BY RANGE (id); CREATE TABLE app.items_all "
     "PARTITION OF app.items FOR VALUES FROM (MINVALUE) TO (MAXVALUE)", True),  # COPY routes rows to partitions
    (f"CREATE TABLE app.base ({COLUMNS}, PRIMARY KEY (id, k)); CREATE VIEW app.items AS SELECT * FROM app.base",
     False),  # INSERT goes through an updatable view, COPY does not
], ids=["as declared", "another column", "a shorter varchar", "a wider integer", "no key", "partitioned", "view"])
def test_fresh_rows_are_copied_only_into_tables_of_the_declared_types(servers, pg_target, ddl, copies):
    name, conn = pg_target
    with conn.cursor() as cur:
        cur.execute(f"CREATE SCHEMA app; {ddl}")
    sink = PostgresSink(DbUrl.parse(servers.postgres.url(name)), "postgres")
    try:
        assert copies_fresh(sink, SCHEMA) is copies
        if "VIEW" in ddl:  # no index to upsert by either; and were there one, still not a table
            with sink.transaction() as cur:
                assert sink.lookups.copies_fresh(cur, SCHEMA, sink.batches.types(SCHEMA)) is False
        if copies:  # COPY does not run rules: an INSERT rule turns it off
            with conn.cursor() as cur:
                cur.execute("CREATE TABLE app.log (id bigint); CREATE RULE logged AS ON INSERT TO app.items "
                            "DO ALSO INSERT INTO app.log VALUES (NEW.id)")
            assert copies_fresh(sink, SCHEMA) is False
    finally:
        sink.close()
