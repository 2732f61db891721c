"""Each table asset carries the two verification checks: one partitioned like the asset (per split), one for the
whole table."""
import dagster as dg

from cdc_assets.config import load_config
from cdc_assets.defs.build import build_definitions
from cdc_assets.defs.checks import SPLIT_CHECK, TABLE_CHECK, _result
from cdc_assets.engine.verify import INCONCLUSIVE, PASSED, SplitCheck
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


def test_the_check_result_counts_busy_retries_and_says_a_shared_reason_once():
    no_sync = "no sync is running for task shop_sync (nothing holds its lease): start `cdc-assets sync`"
    checks = [SplitCheck("shop.orders:0000", PASSED, "10 rows equal", source_rows=10, target_rows=10, retries=2,
                         refusals="1 deadlock, 1 lock wait timeout"),
              SplitCheck("shop.orders:0001", INCONCLUSIVE, "the source was busy: ...", retries=8,
                         refusals="8 deadlocks"),
              *[SplitCheck(f"shop.customers:000{i}", INCONCLUSIVE, no_sync) for i in range(3)]]
    result = _result(checks)
    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN
    assert result.metadata["busy_retries"].value == 10
    assert result.description.count(no_sync) == 1
    assert "shop.customers:0000 .. shop.customers:0002 (3 splits): INCONCLUSIVE: " + no_sync in result.description
    assert "source busy: 8 retries (8 deadlocks)" in result.description
    assert "source busy: 2 retries (1 deadlock, 1 lock wait timeout)" in result.metadata["per_split"].value
