"""The code location loads from a config alone, with one split-partitioned asset per table."""
import importlib

import dagster as dg
import yaml

from cdc_assets.core.splits import SplitPlan
from cdc_assets.core.tables import TableId
from cdc_assets.defs.names import partitions_name
from cdc_assets.defs.partitions import register


def write_config(tmp_path, tables):
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump({
        "task_id": "shop_sync",
        "source": {"db_type": "mysql", "url": "mysql://cdc:${CDC_SRC_PASSWORD}@127.0.0.1:1", "tables": tables},
        "target": {"db_type": "postgres", "url": "postgresql://app@127.0.0.1:1/warehouse"},
    }))
    return path


def test_definitions_module_loads_one_partitioned_asset_per_table(tmp_path, monkeypatch):
    monkeypatch.setenv("CDC_SRC_PASSWORD", "s3cret-pw")
    monkeypatch.setenv("CDC_ASSETS_CONFIG", str(write_config(tmp_path, ["shop.orders", "shop.customers"])))
    import cdc_assets.definitions as module

    defs = importlib.reload(module).defs
    repo = defs.get_repository_def()
    keys = {a.key for a in repo.asset_graph.asset_nodes}
    assert keys == {dg.AssetKey(["shop_sync", "shop", "orders"]), dg.AssetKey(["shop_sync", "shop", "customers"])}
    orders = defs.get_assets_def(dg.AssetKey(["shop_sync", "shop", "orders"]))
    assert isinstance(orders.partitions_def, dg.DynamicPartitionsDefinition)
    assert orders.partitions_def.name == "shop_sync__shop__orders__splits"
    assert orders.group_names_by_key[orders.key] == "shop_sync"
    assert "s3cret-pw" not in str(orders.metadata_by_key[orders.key])
    assert repo.get_sensor_def("shop_sync_split_planner") is not None


def test_register_adds_missing_splits_and_drops_stale_ones():
    table = TableId("shop", "orders")
    plan = SplitPlan(table, "id", "int", (10, 20), (10, 10, 3), "now")
    with dg.instance_for_test() as instance:
        name = partitions_name("t1", table)
        instance.add_dynamic_partitions(name, ["shop.orders:0009"])  # from an older plan
        assert register(instance, "t1", [plan]) == 3
        assert instance.get_dynamic_partitions(name) == ["shop.orders:0000", "shop.orders:0001", "shop.orders:0002"]
        assert register(instance, "t1", [plan]) == 0
