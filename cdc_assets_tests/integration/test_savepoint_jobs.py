"""The savepoint jobs on a real Dagster instance: create and roll back with the name as run config; each run
records the savepoint on the run and as an observation of every table asset; after a rollback the incremental
launcher asks for a run again, although an earlier run started from the same checkpoint."""
import dagster as dg

from cdc_assets.config import load_config
from cdc_assets.defs.build import build_definitions
from cdc_assets.defs.incremental import _decide
from cdc_assets.defs.names import asset_key
from cdc_assets.defs.savepoints import savepoint_job_name
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets_tests.integration.test_savepoints import MYSQL_SEED, changes, rows, run
from cdc_assets_tests.support import snapshot_all, source_database, write_config


def run_config(task: str, action: str, name: str) -> dict:
    return {"ops": {f"{task}_savepoint_{action}_op": {"config": {"name": name}}}}


def test_savepoint_jobs_create_and_roll_back_and_show_in_the_ui(tmp_path, servers, spark, unique_name, pg_target):
    ns, target = unique_name, pg_target[1]
    with source_database(servers, "mysql", ns, MYSQL_SEED) as conn:
        task = f"spj_{ns}"
        path = write_config(tmp_path, servers, task_id=task, source="mysql", source_db=ns,
                            tables=[f"{ns}.items", f"{ns}.pairs"], target="postgres", target_db=pg_target[0],
                            snapshot={"split_size": 200})
        config = load_config(path)
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        try:
            snapshot_all(rt)
            sync(rt, until_caught_up=True)
            defs = build_definitions(config, str(path))
            with dg.instance_for_test() as instance:
                created = defs.get_job_def(savepoint_job_name(task, "create")).execute_in_process(
                    run_config=run_config(task, "create", "before_release"), instance=instance)
                assert created.success
                at_savepoint = rows(conn, "mysql", ns)
                [output] = [e for e in created.all_events if e.event_type_value == "STEP_OUTPUT"]
                meta = output.event_specific_data.metadata
                assert meta["savepoint"].value == "before_release" and "before_release: epoch 1" in meta["savepoints"].value

                table = config.source.table_ids[0]
                [observation] = instance.fetch_observations(asset_key(task, table), limit=5).records
                seen = observation.asset_observation.metadata
                assert seen["savepoint"].value == "before_release" and seen["action"].value == "created"

                run(conn, changes(ns, 1000))
                request = _decide(rt)  # the run that applies them starts from the savepoint's checkpoint
                assert isinstance(request, dg.RunRequest)
                first_key = request.run_key
                sync(rt, until_caught_up=True)

                rolled = defs.get_job_def(savepoint_job_name(task, "rollback")).execute_in_process(
                    run_config=run_config(task, "rollback", "before_release"), instance=instance)
                assert rolled.success
                assert rows(target, "postgres", ns) == at_savepoint
                observed = [r.asset_observation.metadata["action"].value
                            for r in instance.fetch_observations(asset_key(task, table), limit=5).records]
                assert "rolled back to" in observed

                request = _decide(rt)  # the log is ahead of the savepoint's checkpoint again
                assert isinstance(request, dg.RunRequest) and request.run_key != first_key
                assert "~before_release@" in request.run_key

                failed = defs.get_job_def(savepoint_job_name(task, "rollback")).execute_in_process(
                    run_config=run_config(task, "rollback", "no_such"), instance=instance, raise_on_error=False)
                assert not failed.success
                sync(rt, until_caught_up=True)
                assert rows(target, "postgres", ns) == rows(conn, "mysql", ns)
        finally:
            rt.close()
