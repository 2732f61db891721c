"""Verification always on (`verify.every_secs`): the task's verify sensor asks for the split check of the splits
proven equal longest ago, one run per split, so that every split's last proof rotates; with `verify.repair: auto`
it also materializes a split whose verification failed, and that run's check proves it equal again."""
import dagster as dg

from cdc_assets.config import load_config
from cdc_assets.defs.build import build_definitions
from cdc_assets.defs.checks import SPLIT_CHECK
from cdc_assets.defs.names import asset_key
from cdc_assets.defs.partitions import register
from cdc_assets.defs.resources import CdcTask, task_spark
from cdc_assets.defs.verify_sensor import REPAIR_TAG
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.verify import FAILED, PASSED, verify_table
from cdc_assets_tests.support import fetch_rows, snapshot_all, source_database, write_config

ROWS = 40


def test_the_sensor_rotates_the_splits_and_repairs_a_failed_one(tmp_path, servers, unique_name, pg_target, spark):
    seed = ["CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO items SELECT seq, CONCAT('item ', seq) FROM seq_1_to_{ROWS}"]
    with source_database(servers, "mysql", unique_name, seed) as conn:
        path = write_config(tmp_path, servers, task_id=f"vs_{unique_name}", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.items"], target="postgres", target_db=pg_target[0],
                            snapshot={"split_size": 10},
                            verify={"every_secs": 30, "splits_per_tick": 2, "repair": "auto"})
        config = load_config(path)
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        try:
            snapshot_all(rt)
            with conn.cursor() as cur:
                cur.execute("UPDATE items SET name = 'changed' WHERE id = 1")
            sync(rt, until_caught_up=True)
            table = config.source.table_ids[0]
            splits = [s.id for s in rt.plans.load(table).splits]
            assert len(splits) >= 4

            defs = build_definitions(config, str(path))
            sensor = defs.get_sensor_def(f"{config.task_id}_verify")
            asset = defs.get_assets_def(asset_key(config.task_id, table))
            check = defs.get_asset_checks_def(dg.AssetCheckKey(asset.key, SPLIT_CHECK))
            resources = {"cdc_task": CdcTask(config_path=str(path)), "pyspark": task_spark(config)}
            with dg.instance_for_test() as instance:
                register(instance, config.task_id, [tp.plan for tp in ensure_plans(rt)])

                def tick() -> list[dg.RunRequest]:
                    # As the daemon evaluates it: run requests' partitions are checked against the instance.
                    with dg.partition_loading_context(dynamic_partitions_store=instance):
                        result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs))
                    return list(result.run_requests or [])

                def run_check(request: dg.RunRequest) -> bool:
                    result = dg.materialize([asset, check], instance=instance, resources=resources,
                                            selection=dg.AssetSelection.checks(check),
                                            tags={"dagster/partition": request.partition_key})
                    [evaluation] = result.get_asset_check_evaluations()
                    return evaluation.passed

                seen: list[str] = []
                for _ in range(len(splits) // 2):
                    requests = tick()
                    assert len(requests) == 2 and all(r.asset_check_keys == [check.check_key] for r in requests)
                    assert not {r.partition_key for r in requests} & set(seen), "proven splits come last"
                    assert all(run_check(r) for r in requests)
                    seen += [r.partition_key for r in requests]
                assert set(seen) <= set(splits) and len(seen) == len(splits) // 2 * 2

                bad = splits[1]
                with pg_target[1].cursor() as cur:
                    cur.execute(f'UPDATE "{unique_name}".items SET name = %s WHERE id = %s', ("corrupted", 15))
                    assert cur.rowcount == 1
                [failed] = verify_table(rt, table, [bad], wait_secs=30)
                assert failed.status == FAILED, failed.line()

                requests = tick()
                repairs = [r for r in requests if r.tags.get(REPAIR_TAG)]
                assert [(r.partition_key, r.asset_selection) for r in repairs] == [(bad, [asset.key])]
                assert bad not in {r.partition_key for r in requests if r not in repairs}
                repaired = dg.materialize([asset, check], instance=instance, resources=resources,
                                          partition_key=bad, tags=repairs[0].tags)
                assert repaired.success
                [evaluation] = repaired.get_asset_check_evaluations()
                assert evaluation.passed, evaluation.description
                assert not [r for r in tick() if r.tags.get(REPAIR_TAG)], "a repaired split is not repaired again"
            target_rows = fetch_rows(pg_target[1], f'"{unique_name}".items', "id")
            assert target_rows == fetch_rows(conn, "items", "id")
            assert verify_table(rt, table, [bad], wait_secs=30)[0].status == PASSED
        finally:
            rt.close()
