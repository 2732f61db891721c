"""`cdc-assets snapshot` goes through Dagster's runs with one runtime and one load of the config for the whole
command, and each run still starts on fresh connections."""
from __future__ import annotations

import pytest

from cdc_assets.config import load_config
from cdc_assets.defs import resources
from cdc_assets.defs.snapshot_run import cli_instance, run_snapshot
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets_tests.support import fetch_rows, postgres_target, source_database, write_config

pytestmark = pytest.mark.spark


def test_the_snapshot_command_opens_one_runtime_and_loads_its_config_once(tmp_path, servers, unique_name,
                                                                          monkeypatch):
    tgt = postgres_target(servers, f"{unique_name}_tgt")
    rows = ", ".join(f"({i}, 'v{i}')" for i in range(1, 301))
    with source_database(servers, "mysql", unique_name, ["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))",
                                                          f"INSERT INTO t VALUES {rows}"]) as src:
        path = write_config(tmp_path, servers, task_id="route", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target="postgres", target_db=f"{unique_name}_tgt",
                            snapshot={"split_size": 100, "partitions_per_run": 1})
        config = load_config(path)
        opened, loads, reconnects = [], [], []
        original_init, original_reconnect = TaskRuntime.__init__, TaskRuntime.reconnect

        def counting_init(self, *args, **kwargs):
            original_init(self, *args, **kwargs)
            if self.task not in [rt.task for rt in opened]:
                opened.append(self)

        def counting_reconnect(self):
            reconnects.append(self)
            original_reconnect(self)

        monkeypatch.setattr(TaskRuntime, "__init__", counting_init)
        monkeypatch.setattr(TaskRuntime, "reconnect", counting_reconnect)
        monkeypatch.setattr(resources, "load_config", lambda p: loads.append(p) or load_config(p))

        home = tmp_path / "dagster"
        home.mkdir()
        report = run_snapshot(config, str(path), cli_instance(home))

        assert report.unfinished == 0 and [t.runs for t in report.tables] == [3], report.lines()
        assert len(opened) == 1, f"{len(opened)} runtimes opened by one snapshot command"
        assert loads == [], f"the runs loaded the task file again: {loads}"
        assert reconnects.count(opened[0]) >= 1 + 3, "each run ends by dropping its connections"
        assert fetch_rows(tgt, f'"{unique_name}".t', "id") == fetch_rows(src, "t", "id")
    tgt.close()
