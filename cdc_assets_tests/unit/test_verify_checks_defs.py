"""Each table asset carries the two verification checks: one partitioned like the asset (per split), one for the
whole table."""
import dagster as dg

from cdc_assets.config import load_config
from cdc_assets.defs.build import build_definitions
from cdc_assets.defs.checks import SPLIT_CHECK, TABLE_CHECK
from cdc_assets_tests.unit.test_definitions_load import write_config


def test_every_table_has_a_split_check_and_a_table_check(tmp_path, monkeypatch):
    monkeypatch.setenv("CDC_SRC_PASSWORD", "pw")
    path = write_config(tmp_path, ["shop.orders", "shop.customers"])
    defs = build_definitions(load_config(path), str(path))
    for table in ("orders", "customers"):
        asset = defs.get_assets_def(dg.AssetKey(["shop_sync", "shop", table]))
        split = defs.get_asset_checks_def(dg.AssetCheckKey(asset.key, SPLIT_CHECK))
        whole = defs.get_asset_checks_def(dg.AssetCheckKey(asset.key, TABLE_CHECK))
        [split_spec] = split.check_specs
        [whole_spec] = whole.check_specs
        assert split_spec.partitions_def == asset.partitions_def
        assert whole_spec.partitions_def is None
    names = [k.name for k in defs.get_repository_def().asset_graph.asset_check_keys]
    assert sorted(n for n in names if n in (SPLIT_CHECK, TABLE_CHECK)) == [SPLIT_CHECK] * 2 + [TABLE_CHECK] * 2
