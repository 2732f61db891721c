"""The registry names what it cannot serve instead of falling through to another engine."""
import pytest

from cdc_assets.core.boundary import Log, Sink, SnapshotSource
from cdc_assets.core.urls import DbUrl
from cdc_assets.engine.registry import SINKS, SOURCES, sink_factory, source_engine
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


@pytest.mark.parametrize("protocol, classes", [
    (SnapshotSource, [engine.snapshot for engine in SOURCES.values()]),
    (Log, [engine.log for engine in SOURCES.values()]),
    (Sink, list(SINKS.values())),
], ids=["SnapshotSource", "Log", "Sink"])
def test_every_engine_declares_every_member_of_its_protocol(protocol, classes):
    """The engine asks what a protocol declares and never probes (test_architecture.py): so every registered class
    has every method and capability of its protocol itself, a MongoDB one too (`pipes_copy`, `jdbc_endpoint`,
    `supports_savepoints`). `url` is each instance's own."""
    members = {n for n in [*protocol.__annotations__, *vars(protocol)] if not n.startswith("_")} - {"url"}
    missing = {cls.__name__: sorted(n for n in members if not hasattr(cls, n)) for cls in classes}
    assert {name: gaps for name, gaps in missing.items() if gaps} == {}
