"""Two tasks in one code location, on the real servers: each job's run uses its own task's source, target and
positions through the location's one `cdc_task` resource."""
import dagster as dg

from cdc_assets.config import load_config
from cdc_assets.defs.code_location import code_location
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets_tests.support import execute, fetch_rows, postgres_target, source_database, write_config


def test_each_tasks_jobs_run_on_their_own_task(tmp_path, servers, unique_name):
    folder = tmp_path / "tasks"
    folder.mkdir()
    names = {task: f"{unique_name}_{task}" for task in ("a", "b")}
    targets = {task: postgres_target(servers, f"{name}_tgt") for task, name in names.items()}
    with source_database(servers, "mysql", names["a"], ["CREATE TABLE t (id INT PRIMARY KEY, v INT)"]) as src_a, \
            source_database(servers, "mysql", names["b"], ["CREATE TABLE t (id INT PRIMARY KEY, v INT)"]) as src_b:
        paths = {task: write_config(folder, servers, task_id=f"loc_{task}", source="mysql", source_db=name,
                                    tables=[f"{name}.t"], target="postgres", target_db=f"{name}_tgt",
                                    runtime={"data_dir": str(tmp_path / f"state_{task}")},
                                    pipeline={"startup_mode": "latest"})
                 for task, name in names.items()}
        for path in paths.values():
            rt = TaskRuntime(load_config(path))
            rt.sink.ensure_table(rt.source.describe(rt.config.source.table_ids[0]))
            rt.close()
        defs = code_location(str(folder))
        with dg.instance_for_test() as instance:
            for task in ("a", "b"):  # the first runs: each starts its own task at its log end
                assert defs.get_job_def(f"loc_{task}_incremental").execute_in_process(instance=instance).success
            execute(src_a, "INSERT INTO t VALUES (1, 1)")
            execute(src_b, "INSERT INTO t VALUES (2, 2), (3, 3)")
            assert defs.get_job_def("loc_b_incremental").execute_in_process(instance=instance).success
            assert fetch_rows(targets["b"], f'"{names["b"]}".t', "id") == [(2, 2), (3, 3)]
            assert fetch_rows(targets["a"], f'"{names["a"]}".t', "id") == []  # task a's run has not come yet
            reset = defs.get_job_def("loc_a_reset").execute_in_process(
                instance=instance, run_config={"ops": {"loc_a_reset_checkpoint": {"config": {"to": "latest"}}}})
            assert reset.success
            assert defs.get_job_def("loc_a_incremental").execute_in_process(instance=instance).success
        assert fetch_rows(targets["a"], f'"{names["a"]}".t', "id") == []  # the reset skipped row 1
        assert fetch_rows(targets["b"], f'"{names["b"]}".t', "id") == [(2, 2), (3, 3)]
    for conn in targets.values():
        conn.close()
