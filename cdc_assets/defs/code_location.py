"""The code location: every task named by $CDC_ASSETS_CONFIG (a task file, or a folder of them) in one Definitions.

Each task keeps its own asset group, sensors and jobs (all named after its task_id); one `cdc_task` and one
`pyspark` resource serve them all and pick the run's task (`resources.run_task`).

Decision, for a folder: a task file that cannot be loaded (bad YAML, an invalid key, a task_id another file
claims too) does not take the other tasks down with it: their sensors keep the log phase going, whose stop
could outlast the source's log retention. The bad file is reported instead, where a data engineer looks: a
sensor `config_error_<file>` that fails every tick with the file, the error and the fix (Automation page), the
location's metadata, and the code server's log. A single task file named directly is the whole location: its
error fails the location, shown as the code location's error. With no config at all the location loads empty
but for a sensor whose skip reason (and the location's metadata) says how to configure one. Errors are the
config loader's, which never echo a value.
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import dagster as dg

from cdc_assets.config import CONFIG_ENV, TaskConfig, load_config
from cdc_assets.defs.build import build_definitions
from cdc_assets.defs.resources import CdcTask, TaskSpark
from cdc_assets.task_files import BadTaskFile, load_folder
from cdc_assets.errors import CdcError, ConfigError

log = logging.getLogger("cdc_assets.code_location")
DEFAULT_FILE = "cdc_assets.yaml"
HOW_TO = (f"Set {CONFIG_ENV} to a task file (YAML) or to a folder of task files (*.yaml, *.yml; one task each, "
          f"each its own asset group, sensors and jobs), or put {DEFAULT_FILE} in the folder dagster runs in, then "
          "reload the code location. A task file: task_id, source {db_type, url, tables}, target {db_type, url}; "
          "see docs/getting-started/first-task.md.")


def code_location(config: str | None = None, cwd: Path | None = None) -> dg.Definitions:
    """The Definitions for $CDC_ASSETS_CONFIG's value (`config`): a file, a folder, or nothing."""
    if not config:
        default = (cwd or Path.cwd()) / DEFAULT_FILE
        if not default.exists():
            return _empty(f"No task configured: {CONFIG_ENV} is not set and there is no {default}.")
        config = str(default)
    path = Path(config).expanduser().resolve()
    if path.is_dir():
        good, bad = load_folder(path)
        if not good and not bad:
            return _empty(f"{CONFIG_ENV} names the folder {path}, which holds no task files (*.yaml, *.yml).")
        return combine([(t.config, str(t.path)) for t in good], bad, path)
    if not path.exists():
        raise ConfigError(f"{CONFIG_ENV} names {path}, which does not exist",
                          f"set {CONFIG_ENV} to a task file or a folder of task files, or unset it for an empty "
                          "code location")
    return build_definitions(load_config(path), str(path))


def combine(tasks: list[tuple[TaskConfig, str]], bad: list[BadTaskFile], folder: Path) -> dg.Definitions:
    """Many tasks' Definitions in one, with one `cdc_task` and one `pyspark` resource choosing each run's task.
    Whatever else `build_definitions` makes (assets, checks, jobs, sensors, schedules) is carried over as is."""
    parts = [(config, build_definitions(config, path)) for config, path in tasks]
    resources: dict[str, object] = {}
    if parts:
        resources = {
            "cdc_task": CdcTask(config_paths={c.task_id: p for c, p in tasks}),
            "pyspark": TaskSpark(spark_config=parts[0][1].resources["pyspark"].spark_config,
                                 task_spark_configs={c.task_id: d.resources["pyspark"].spark_config for c, d in parts}),
        }
    for _, defs in parts:
        for key, value in (defs.resources or {}).items():
            if key not in ("cdc_task", "pyspark") and resources.setdefault(key, value) is not value:
                raise CdcError(f"resource {key} differs between the tasks of {folder}",
                               "build it once for every task, or pick the task inside it as cdc_task does")
    for b in bad:
        log.error("task file %s not loaded: %s", b.path, b.error)
    metadata = {"tasks": dg.MetadataValue.json({c.task_id: p for c, p in tasks}),
                "task_folder": dg.MetadataValue.path(str(folder))}
    if bad:
        metadata["task_files_not_loaded"] = dg.MetadataValue.md("\n".join(f"- `{b.path}`: {b.error}" for b in bad))
    return dg.Definitions(
        assets=[a for _, d in parts for a in (d.assets or [])],
        asset_checks=[c for _, d in parts for c in (d.asset_checks or [])],
        jobs=[j for _, d in parts for j in (d.jobs or [])],
        sensors=[s for _, d in parts for s in (d.sensors or [])] + [_error_sensor(b) for b in bad],
        schedules=[s for _, d in parts for s in (d.schedules or [])],
        resources=resources,
        metadata=metadata,
        executor=dg.in_process_executor,  # as build_definitions: a run's steps in its own process
    )


def error_sensor_name(path: Path) -> str:
    return "config_error_" + re.sub(r"[^A-Za-z0-9_]", "_", path.stem)


def _error_sensor(bad: BadTaskFile) -> dg.SensorDefinition:
    @dg.sensor(name=error_sensor_name(bad.path), default_status=dg.DefaultSensorStatus.RUNNING,
               minimum_interval_seconds=60,
               description=f"Task file {bad.path} could not be loaded; the other tasks run. {bad.error}")
    def _report(context: dg.SensorEvaluationContext):
        raise ConfigError(f"task file {bad.path} is not loaded: {bad.error}",
                          "fix the file and reload the code location (Deployment > the code location > Reload)")

    return _report


NOT_CONFIGURED_SENSOR = "cdc_assets_not_configured"


def _empty(why: str) -> dg.Definitions:
    """No task: the location loads, and its one sensor (Automation page) says, in its description and in every
    tick's skip reason, how to configure one."""
    log.warning("%s %s", why, HOW_TO)

    @dg.sensor(name=NOT_CONFIGURED_SENSOR, default_status=dg.DefaultSensorStatus.RUNNING,
               minimum_interval_seconds=300, description=f"{why} {HOW_TO}")
    def _not_configured(context: dg.SensorEvaluationContext):
        return dg.SkipReason(f"{why} {HOW_TO}")

    return dg.Definitions(sensors=[_not_configured],
                          metadata={"cdc_assets": dg.MetadataValue.md(f"**{why}**\n\n{HOW_TO}"),
                                    "how_to_configure": dg.MetadataValue.text(HOW_TO)})


def from_environment() -> dg.Definitions:
    return code_location(os.environ.get(CONFIG_ENV))
