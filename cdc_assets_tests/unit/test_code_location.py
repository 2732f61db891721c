"""One code location, many tasks: a folder of task files, the empty location, and bad task files reported by
name without taking the other tasks down."""
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from cdc_assets.defs.code_location import NOT_CONFIGURED_SENSOR, code_location, error_sensor_name
from cdc_assets.defs.resources import run_task
from cdc_assets.errors import CdcError, ConfigError

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-pw"


def task(task_id: str, tables=("shop.orders",), **more) -> dict:
    return {"task_id": task_id,
            "source": {"db_type": "mysql", "url": f"mysql://cdc:{PASSWORD}@127.0.0.1:1", "tables": list(tables)},
            "target": {"db_type": "postgres", "url": "postgresql://app@127.0.0.1:1/warehouse"}, **more}


def write(folder: Path, name: str, raw) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(raw if isinstance(raw, str) else yaml.safe_dump(raw))
    return path


def test_a_folder_loads_each_task_as_its_own_group_sensors_and_jobs(tmp_path):
    write(tmp_path, "a.yaml", task("shop_a", ["shop.orders", "shop.customers"]))
    write(tmp_path, "b.yml", task("shop_b", ["shop.orders"], spark={"master": "local[1]"}))
    write(tmp_path, "notes.txt", "not a task file")
    defs = code_location(str(tmp_path))
    repo = defs.get_repository_def()
    groups = {key: node.group_name for key, node in ((n.key, n) for n in repo.asset_graph.asset_nodes)}
    assert groups == {dg.AssetKey(["shop_a", "shop", "orders"]): "shop_a",
                      dg.AssetKey(["shop_a", "shop", "customers"]): "shop_a",
                      dg.AssetKey(["shop_b", "shop", "orders"]): "shop_b"}
    sensors = {s.name for s in repo.sensor_defs}
    assert sensors == {f"{t}_{s}" for t in ("shop_a", "shop_b") for s in ("split_planner", "incremental_launcher")}
    assert {"shop_a_incremental", "shop_b_incremental"} <= {j.name for j in repo.get_all_jobs()}
    # One resource per key for all tasks, each task's settings kept apart.
    assert defs.resources["cdc_task"].config_paths == {"shop_a": str(tmp_path / "a.yaml"),
                                                       "shop_b": str(tmp_path / "b.yml")}
    spark = defs.resources["pyspark"].task_spark_configs
    assert spark["shop_a"]["spark.master"] == "local[*]" and spark["shop_b"]["spark.master"] == "local[1]"
    assert PASSWORD not in str(defs.metadata) + str(defs.resources["pyspark"])


def test_a_run_belongs_to_the_task_of_its_assets_tag_or_job():
    tasks = ["shop", "shop_sync"]
    assets = dg.DagsterRun(job_name="__ASSET_JOB", asset_selection=frozenset({dg.AssetKey(["shop_sync", "db", "t"])}))
    assert run_task(assets, tasks) == "shop_sync"
    tagged = dg.DagsterRun(job_name="x", tags={"cdc_assets/incremental_task": "shop"})
    assert run_task(tagged, tasks) == "shop"
    assert run_task(dg.DagsterRun(job_name="shop_sync_incremental"), tasks) == "shop_sync"  # the longest prefix
    assert run_task(dg.DagsterRun(job_name="shop_reset"), tasks) == "shop"
    both = dg.DagsterRun(job_name="__ASSET_JOB", asset_selection=frozenset(
        {dg.AssetKey(["shop_sync", "db", "t"]), dg.AssetKey(["shop", "db", "t"])}))
    with pytest.raises(CdcError, match="belongs to tasks shop, shop_sync -- materialize the assets of one task"):
        run_task(both, tasks)
    with pytest.raises(CdcError, match="no task of this code location"):
        run_task(dg.DagsterRun(job_name="other"), tasks)


def test_a_bad_task_file_is_reported_by_name_and_the_others_load(tmp_path):
    write(tmp_path, "good.yaml", task("good"))
    write(tmp_path, "typo.yaml", task("typo", snapshot={"split_sise": 10}))
    write(tmp_path, "broken.yaml", "task_id: [unclosed\n")
    defs = code_location(str(tmp_path))
    repo = defs.get_repository_def()
    assert {n.key for n in repo.asset_graph.asset_nodes} == {dg.AssetKey(["good", "shop", "orders"])}
    report = defs.metadata["task_files_not_loaded"].value
    assert "typo.yaml" in report and "snapshot.split_sise: unknown key" in report and "broken.yaml" in report
    sensor = defs.get_sensor_def(error_sensor_name(tmp_path / "typo.yaml"))
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    with dg.instance_for_test() as instance:
        with pytest.raises(Exception, match=r"typo.yaml is not loaded: invalid config: snapshot.split_sise: unknown "
                                            r"key.*fix the file and reload the code location"):
            sensor(dg.build_sensor_context(instance=instance, definitions=defs))
    assert PASSWORD not in str(defs.metadata) + str(sensor.description)


def test_a_bad_task_file_never_shows_its_password(tmp_path):
    write(tmp_path, "good.yaml", task("good"))
    raw = task("leaky")
    raw["source"]["db_type"] = "postgres"  # the URL is a MySQL one: the error talks about the URL
    write(tmp_path, "leaky.yaml", raw)
    defs = code_location(str(tmp_path))
    report = defs.metadata["task_files_not_loaded"].value
    assert "leaky.yaml" in report and "db_type is postgres" in report and PASSWORD not in report


def test_two_task_files_of_one_task_id_are_an_error_naming_both(tmp_path):
    write(tmp_path, "one.yaml", task("same"))
    write(tmp_path, "two.yaml", task("same", ["shop.customers"]))
    write(tmp_path, "other.yaml", task("other"))
    defs = code_location(str(tmp_path))
    assert {n.key.path[0] for n in defs.get_repository_def().asset_graph.asset_nodes} == {"other"}
    report = defs.metadata["task_files_not_loaded"].value
    both = f"task_id same is claimed by {tmp_path / 'one.yaml'} and {tmp_path / 'two.yaml'}"
    assert report.count(both) == 2 and "give each task file its own task_id" in report


def test_one_task_file_named_directly_fails_the_location_with_its_error(tmp_path):
    path = write(tmp_path, "task.yaml", task("bad", snapshot={"split_size": 0}))
    with pytest.raises(ConfigError, match=r"snapshot.split_size"):
        code_location(str(path))
    with pytest.raises(ConfigError, match=r"does not exist"):
        code_location(str(tmp_path / "missing.yaml"))


def test_no_config_loads_an_empty_location_that_says_how_to_configure_one(tmp_path):
    defs = code_location(None, cwd=tmp_path)
    assert not list(defs.get_repository_def().asset_graph.asset_nodes)
    assert "CDC_ASSETS_CONFIG" in defs.metadata["how_to_configure"].value
    sensor = defs.get_sensor_def(NOT_CONFIGURED_SENSOR)
    with dg.instance_for_test() as instance:
        skipped = sensor(dg.build_sensor_context(instance=instance, definitions=defs))
    assert f"there is no {tmp_path / 'cdc_assets.yaml'}" in skipped.skip_message
    assert "Set CDC_ASSETS_CONFIG to a task file (YAML) or to a folder of task files" in skipped.skip_message
    empty = code_location(str(tmp_path))  # a folder without task files
    assert "holds no task files" in empty.metadata["cdc_assets"].value


def test_dagster_loads_the_repository_workspace_without_any_config(tmp_path):
    """What `dagster dev` in the repository does first: load workspace.yaml's module, here with no config."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO), "DAGSTER_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "dagster", "definitions", "validate", "-w",
                           str(REPO / "workspace.yaml")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "No task configured" in done.stderr


def test_the_cli_refuses_a_folder_naming_what_to_pass(tmp_path):
    write(tmp_path, "a.yaml", task("shop_a"))
    from cdc_assets.config import load_config

    with pytest.raises(ConfigError, match=r"is a folder; this needs one task file -- pass --config .*/<task file>"):
        load_config(tmp_path)
