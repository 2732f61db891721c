"""The registry names what it cannot serve instead of falling through to another engine."""
import pytest

from cdc_assets.core.urls import DbUrl
from cdc_assets.engine.registry import sink_factory, source_engine
from cdc_assets.errors import ConfigError
from cdc_assets.sinks.mongodb.sink import MongoSink
from cdc_assets.sinks.postgres import PostgresSink
from cdc_assets.sources.mongodb.log import MongoLog
from cdc_assets.sources.mongodb.source import MongoSource
from cdc_assets.sources.mysql.log import MysqlLog
from cdc_assets.sources.postgres.source import PostgresSource


def test_each_db_type_gets_its_own_classes():
    assert source_engine("mysql").log is MysqlLog
    assert source_engine("postgres").snapshot is PostgresSource
    assert sink_factory("postgres") is PostgresSink
    assert sink_factory("mongo") is MongoSink
    assert (source_engine("mongo").snapshot, source_engine("mongo").log) == (MongoSource, MongoLog)


def test_an_engine_without_classes_is_refused_by_name():
    with pytest.raises(ConfigError, match="no source for db_type 'oracle'") as raised:
        source_engine("oracle")
    assert "'mongo'" in raised.value.hint  # the engines there are, named
    with pytest.raises(ConfigError, match="no target for db_type 'oracle'") as raised:
        sink_factory("oracle")
    assert "'mongo'" in raised.value.hint and "'mysql'" in raised.value.hint


def test_a_refused_url_never_shows_its_password():
    url = DbUrl.parse("mongodb://u:secret@127.0.0.1:27017/shop")
    with pytest.raises(ConfigError) as raised:
        sink_factory(url.db_type + "x")
    assert "secret" not in str(raised.value) + raised.value.hint
