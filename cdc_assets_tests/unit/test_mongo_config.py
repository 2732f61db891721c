"""`source.collections` for a MongoDB source: which tables it makes, and exact errors for what cannot work."""
import pytest

from cdc_assets.config import parse_config
from cdc_assets.core.tables import TableId
from cdc_assets.engine.registry import source_engine
from cdc_assets.errors import ConfigError
from cdc_assets.sources.mongodb.source import MongoSource

MONGO = {"db_type": "mongo", "url": "mongodb://cdc:s3cret@db1:27017,db2:27017/?replicaSet=rs0",
         "collections": {"shop.orders": {"fields": {"_id": "objectid", "total": "decimal(20,4)"}},
                         "shop.events": None, "crm.people": {"id_kind": "int"}}}
TARGET = {"db_type": "postgres", "url": "postgresql://app@127.0.0.1:5432/warehouse"}


def config(tmp_path, source=None, **extra):
    return parse_config({"task_id": "mongo_sync", "source": source or MONGO, "target": TARGET, **extra}, tmp_path)


def test_each_collection_is_a_table_named_database_dot_collection(tmp_path):
    c = config(tmp_path)
    assert c.source.table_ids == [TableId("shop", "orders"), TableId("shop", "events"), TableId("crm", "people")]
    options = c.source.engine_options
    assert options == {"collections": {"shop.orders": {"fields": {"_id": "objectid", "total": "decimal(20,4)"}},
                                       "shop.events": None, "crm.people": {"id_kind": "int"}}}
    source = source_engine("mongo").snapshot(c.source.db_url, **options)
    assert isinstance(source, MongoSource) and source.db_type == "mongo"
    assert source.spec(TableId("crm", "people")).id_field.kind.value == "int"


@pytest.mark.parametrize("change, expected", [
    ({"tables": ["shop.orders"]}, "source.collections, not source.tables"),
    ({"collections": {}}, "source.collections is empty"),
    ({"collections": {"orders": None}}, "collection 'orders' is not of the form database.collection"),
    ({"collections": {"shop.orders": {"fields": {"total": "int"}}}}, "the fields do not declare _id"),
    ({"collections": {"shop.orders": {"fields": {"_id": "int"}, "id_kind": "int"}}}, "id_kind is for collections"),
    ({"collections": {"shop.orders": {"field": {}}}}, "source.collections.shop.orders.field: unknown key"),
    ({"split_columns": {"shop.orders": "total"}}, "split_columns does not apply to a mongodb source"),
    ({"exclude_columns": {"shop.nope": ["a"]}}, "not in source.collections: ['shop.nope']"),
])
def test_bad_collections_are_refused_naming_the_key(tmp_path, change, expected):
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, {**MONGO, **change})
    assert expected in caught.value.message and "s3cret" not in str(caught.value)


def test_collections_are_for_mongodb_only(tmp_path):
    sql = {"db_type": "mysql", "url": "mysql://cdc@127.0.0.1:3306", "tables": ["shop.orders"],
           "collections": {"shop.orders": None}}
    with pytest.raises(ConfigError, match="source.collections is for mongodb sources"):
        config(tmp_path, sql)


@pytest.mark.parametrize("pipeline, expected", [
    ({"exactly_once": True}, "exactly_once"),  # resumer check comes first, mongo's too: both name the key
    ({"startup_mode": "position", "start_position": {"lsn": "0/16B3748"}}, "does not fit a mongodb source"),
])
def test_pipeline_options_a_mongodb_source_cannot_honour(tmp_path, pipeline, expected):
    with pytest.raises(ConfigError, match=expected):
        config(tmp_path, pipeline=pipeline, resumer={"resume_type": "from_target"})


def test_a_kind_no_bson_value_maps_to_is_refused_when_the_source_is_built(tmp_path):
    c = config(tmp_path, {**MONGO, "collections": {"shop.orders": {"fields": {"_id": "objectid", "t": "time"}}}})
    with pytest.raises(ConfigError) as caught:
        source_engine("mongo").snapshot(c.source.db_url, **c.source.engine_options)
    assert "source.collections.shop.orders: field 't' has kind 'time'" in caught.value.message


def test_the_docker_mongo_task_is_a_valid_config(monkeypatch):
    from pathlib import Path

    from cdc_assets.config import load_config

    monkeypatch.setenv("PG_PASSWORD", "pw")
    c = load_config(Path(__file__).parents[2] / "docker" / "task-mongo.yaml")
    assert c.source.db_type == "mongo" and c.source.table_ids == [TableId("shop", "orders"), TableId("shop", "events")]
    source = source_engine("mongo").snapshot(c.source.db_url, **c.source.engine_options)
    assert source.spec(TableId("shop", "orders")).schema().primary_key == ("_id",)
