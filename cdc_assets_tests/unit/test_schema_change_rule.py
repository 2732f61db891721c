"""The rule engine/schema_changes.py applies to a schema change, per policy (the sink's catalog as given)."""
from dataclasses import replace
from types import SimpleNamespace

import pytest

from cdc_assets.core.added_fill import AddedFill
from cdc_assets.core.events import SchemaChange, SchemaChangeKind as K
from cdc_assets.core.fits import capacity
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema, schema_from_json, schema_to_json
from cdc_assets.engine.schema_changes import SchemaChangeHalted, settle

T = TableId("shop", "t")
V10, V100 = Column("v", Kind.STRING, "varchar(10)", length=10), Column("v", Kind.STRING, "varchar(100)", length=100)
ID, W = Column("id", Kind.INT, "int", bits=32), Column("w", Kind.INT, "int", bits=32)
SCHEMA = TableSchema(T, (ID, V10), ("id",), excluded=("x",))
NOW = TableSchema(T, (ID, V100, W), ("id",))
STOP, GO = "stop", None


def sink(v_length: int, added: list):
    caps = {"id": capacity("integer", None, 32, 0, None),
            "v": capacity("character varying", v_length, None, None, None)}
    return SimpleNamespace(column_capacities=lambda table, fresh=False: caps,
                           target_format=lambda: SimpleNamespace(declared=lambda c, k: c.native),
                           alter_column_sql=lambda table, c: f"ALTER {c.name} TYPE {c.native}",
                           add_columns=lambda schema, columns, defaults=None: added.extend(c.name for c in columns))


def decide(kind: K, policy: str, added=(), columns=(), v_length=10):
    change = SchemaChange(T, "DDL", MysqlPosition("b.000001", 4), kind, tuple(added), tuple(columns))
    done: list = []
    try:
        schema = settle(change, SCHEMA, policy, sink(v_length, done), lambda table: NOW)
    except SchemaChangeHalted as stop:
        return STOP, stop.hint, done
    return (GO if schema is None else [c.name for c in schema.columns], schema and schema.excluded, done)


@pytest.mark.parametrize("policy", ["halt", "ignore", "apply_add_columns"])
def test_what_leaves_the_captured_columns_whole_goes_on_under_every_policy(policy):
    assert decide(K.HARMLESS, policy)[0] is GO
    assert decide(K.RETYPED, policy, columns=["x"])[0] is GO  # an excluded column
    assert decide(K.OTHER, policy, columns=["x"])[0] is GO  # dropped or renamed, not captured


@pytest.mark.parametrize("policy", ["halt", "ignore", "apply_add_columns"])
def test_a_retype_is_followed_once_the_target_holds_it_and_drops_renames_stop(policy):
    verdict, hint, _ = decide(K.RETYPED, policy, columns=["v"])
    assert verdict == STOP and "ALTER v TYPE varchar(100)" in hint
    assert decide(K.RETYPED, policy, columns=["v"], v_length=100)[0] == ["id", "v"]
    assert decide(K.OTHER, policy, columns=["v"])[0] == STOP
    assert decide(K.OTHER, policy)[0] == STOP  # the table itself, or not understood


def test_added_columns_stop_halt_are_left_out_by_ignore_and_added_by_apply_add_columns():
    verdict, hint, _ = decide(K.ADDED_COLUMNS, "halt", added=["w"])
    assert verdict == STOP and "apply_add_columns" in hint and "ignore" in hint
    assert decide(K.ADDED_COLUMNS, "ignore", added=["w"]) == (["id", "v"], ("x", "w"), [])
    assert decide(K.ADDED_COLUMNS, "apply_add_columns", added=["w"]) == (["id", "v", "w"], ("x",), ["w"])
    assert decide(K.ADDED_COLUMNS, "halt", added=["x"])[0] is GO  # excluded by the config already


def test_a_table_only_change_goes_on_under_ignore_alone():
    assert decide(K.TABLE_ONLY, "ignore")[0] is GO
    assert decide(K.TABLE_ONLY, "halt")[0] == STOP
    assert decide(K.TABLE_ONLY, "apply_add_columns")[0] == STOP


def test_the_storage_recorded_with_a_followed_change_is_the_one_read_before_any_change_not_followed():
    """A follow records the storage read now only where the catalog shows the definitions followed: where it holds
    a later change too, the storage now may be a rewrite's after it, so the one read with the definitions before is
    kept (sources/postgres/added_fill.py tells a rewrite since by it)."""
    before = replace(SCHEMA, storage="1:1")
    fills: list = []

    def follow(now: TableSchema, added=("w",)) -> TableSchema:
        change = SchemaChange(T, "DDL", MysqlPosition("b.000001", 4), K.ADDED_COLUMNS, tuple(added), ())
        return settle(change, before, "apply_add_columns", sink(10, []), lambda table: now,
                      lambda change, names, had: fills.append(had.storage) or AddedFill())

    as_read = follow(TableSchema(T, (ID, V10, W), ("id",), storage="1:2"))
    assert [c.name for c in as_read.columns] == ["id", "v", "w"] and as_read.storage == "1:2"
    assert follow(replace(NOW, storage="1:3")).storage == "1:1"  # v retyped later: the catalog is ahead
    assert fills == ["1:1", "1:1"]  # the fill is told the storage the task had
    assert as_read == replace(as_read, storage=None)  # not part of the definitions
    assert schema_from_json(schema_to_json(as_read)).storage == "1:2"
    assert schema_from_json(schema_to_json(SCHEMA)).storage is None
