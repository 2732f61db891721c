"""Sources decide what kind of schema change they read; the engine acts on the kind, never on the statement text."""
from __future__ import annotations

import pytest

from cdc_assets.core.events import SchemaChange, SchemaChangeKind
from cdc_assets.core.positions import PgPosition
from cdc_assets.core.tables import TableId
from cdc_assets.sources.mysql.ddl import classify, renamed_tables
from cdc_assets.sources.postgres.drift import Shape, drift

ADDED, HARMLESS, OTHER = SchemaChangeKind.ADDED_COLUMNS, SchemaChangeKind.HARMLESS, SchemaChangeKind.OTHER
RETYPED, TABLE_ONLY = SchemaChangeKind.RETYPED, SchemaChangeKind.TABLE_ONLY
T = TableId("s", "t")


@pytest.mark.parametrize("statement, kind, added, columns", [
    ("ALTER TABLE t ADD COLUMN x INT", ADDED, ("x",), ()),
    ("ALTER TABLE t ADD x INT", ADDED, ("x",), ()),
    ("alter table `db`.`t` add column if not exists `my col` varchar(10)", ADDED, ("my col",), ()),
    ("ALTER TABLE t ADD COLUMN c DECIMAL(10,2) NOT NULL DEFAULT 0, ADD d INT", ADDED, ("c", "d"), ()),
    ("ALTER TABLE t ADD COLUMN (a INT, b ENUM('x','y'))", ADDED, ("a", "b"), ()),
    ("ALTER TABLE t ADD COLUMN c INT COMMENT 'a, DROP COLUMN b', ADD d INT", ADDED, ("c", "d"), ()),
    ("/* from a tool */ ALTER TABLE t ADD COLUMN z INT", ADDED, ("z",), ()),
    ("ALTER TABLE t ADD COLUMN z INT, ALGORITHM=INSTANT", ADDED, ("z",), ()),  # how, not what
    ("ALTER TABLE t ADD COLUMN c INT, ADD INDEX i (c)", ADDED, ("c",), ()),  # the index changes no row image
    ("ALTER TABLE t ADD INDEX iv (v)", HARMLESS, (), ()),
    ("alter table `db`.`t` drop key k, add unique key u (a)", HARMLESS, (), ()),
    ("ALTER TABLE t ADD FULLTEXT INDEX ft (body), ALGORITHM=INPLACE, LOCK=NONE", HARMLESS, (), ()),
    ("ALTER TABLE t COMMENT 'orders, by day'", HARMLESS, (), ()),
    ("ALTER TABLE t ENGINE=InnoDB", HARMLESS, (), ()),
    ("ALTER TABLE t ROW_FORMAT=DYNAMIC, AUTO_INCREMENT = 100, DEFAULT CHARSET=utf8mb4", HARMLESS, (), ()),
    ("ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES u (id)", HARMLESS, (), ()),
    ("ALTER TABLE t DROP FOREIGN KEY fk, DROP CHECK c1, RENAME INDEX a TO b", HARMLESS, (), ()),
    ("ALTER TABLE t ALTER COLUMN v SET DEFAULT 3, ALTER w DROP DEFAULT", HARMLESS, (), ()),
    ("ALTER TABLE t MODIFY COLUMN a BIGINT", RETYPED, (), ("a",)),
    ("ALTER TABLE t MODIFY v VARCHAR(100), MODIFY n DECIMAL(10,2)", RETYPED, (), ("v", "n")),
    ("ALTER TABLE t CHANGE `a` A BIGINT NOT NULL, ADD z INT", RETYPED, ("z",), ("a",)),
    ("ALTER TABLE t ADD COLUMN c INT, DROP COLUMN d", OTHER, ("c",), ("d",)),
    ("ALTER TABLE t DROP COLUMN d", OTHER, (), ("d",)),
    ("ALTER TABLE t DROP d", OTHER, (), ("d",)),
    ("ALTER TABLE t RENAME COLUMN a TO b", OTHER, (), ("a",)),
    ("ALTER TABLE t CHANGE a b INT", OTHER, (), ("a",)),
    ("ALTER TABLE t ADD (c INT, INDEX i (c))", OTHER, (), ()),
    ("ALTER TABLE t RENAME TO u", OTHER, (), ()),
    ("ALTER TABLE t ADD PRIMARY KEY (a)", OTHER, (), ()),
    ("ALTER TABLE t DROP PRIMARY KEY, DROP COLUMN d", OTHER, (), ()),
    ("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", OTHER, (), ()),
    ("ALTER TABLE t ADD PARTITION (PARTITION p3 VALUES LESS THAN (30))", OTHER, (), ()),
    ("ALTER TABLE t PARTITION BY HASH (id) PARTITIONS 4", OTHER, (), ()),
    ("ALTER TABLE t TRUNCATE PARTITION p0", OTHER, (), ()),
    ("RENAME TABLE t TO u", OTHER, (), ()),
    ("DROP TABLE t", OTHER, (), ()),
    ("TRUNCATE TABLE t", OTHER, (), ()),
    ("CREATE TABLE t (id INT PRIMARY KEY)", TABLE_ONLY, (), ()),  # t exists: IF NOT EXISTS, or a replay
    ("CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY)", TABLE_ONLY, (), ()),
    ("CREATE OR REPLACE TABLE t (id INT PRIMARY KEY)", OTHER, (), ()),
])
def test_mysql_statements_are_classified_by_their_clauses(statement, kind, added, columns):
    assert classify(statement) == (kind, added, columns)


@pytest.mark.parametrize("statement, renamed", [
    ("RENAME TABLE t TO t2", {"t": "t2"}),
    ("/* app */ rename table `db`.`t` to other.t, u TO v", {"t": "other.t", "u": "v"}),
    ("RENAME TABLE t TO tmp, u TO t, tmp TO u", {"t": "u", "u": "t"}),  # a swap: each ends as the other
    ("RENAME TABLE t TO u, u TO v", {"t": "v"}),
    ("ALTER TABLE t ADD COLUMN x INT, RENAME TO t2", {"t": "t2"}),
    ("ALTER TABLE db.t RENAME AS db.t2", {"t": "t2"}),
    ("ALTER TABLE t RENAME COLUMN x TO y", {}),
    ("ALTER TABLE t RENAME INDEX i TO j, RENAME KEY k TO m", {}),
    ("ALTER TABLE t MODIFY v INT", {}),
])
def test_mysql_renamed_tables_end_under_the_last_name_each_gets(statement, renamed):
    def table(name: str) -> TableId:
        return TableId(*name.split(".")) if "." in name else TableId("db", name)

    assert renamed_tables(statement, "db") == {table(old): table(new) for old, new in renamed.items()}


def shape(table: TableId = T, key: tuple[str, ...] | None = ("id",), **columns: str) -> Shape:
    return Shape(table, columns, key)


BEFORE = shape(id="integer", v="text")


@pytest.mark.parametrize("after, kind, added, columns, statement", [
    (shape(id="integer", v="text", w="numeric(10,2)", x="date"), ADDED, ("w", "x"), (),
     "columns changed: added [w, x]"),
    (shape(id="integer", w="text"), OTHER, ("w",), ("v",), "columns changed: added [w]; removed [v]"),
    (shape(id="integer", v="varchar(10)"), RETYPED, (), ("v",), "columns changed: retyped [v]"),
    (shape(id="integer", v="text", w="text", key=("id", "v")), OTHER, ("w",), (),
     "columns changed: added [w]; replica identity changed: [id] -> [id, v]"),
    (shape(TableId("s", "t2"), id="integer", v="text"), TABLE_ONLY, (), (), "renamed to s.t2"),
    (shape(TableId("s", "t2"), id="integer", v="text", w="text"), OTHER, ("w",), (),
     "columns changed: added [w]; renamed to s.t2"),
])
def test_postgres_drift_kinds(after, kind, added, columns, statement):
    changed = drift(BEFORE, after)
    assert changed and changed.kind is kind
    change = changed.schema_change(T, PgPosition(42))
    renamed = after.table if after.table != T else None
    assert change == SchemaChange(T, statement, PgPosition(42), kind, added, columns, renamed)


def test_postgres_relation_with_the_same_columns_is_no_drift():
    assert not drift(BEFORE, shape(id="integer", v="text"))
    assert not drift(shape(key=None, id="integer", v="text"), shape(key=("id", "v"), id="integer", v="text"))
