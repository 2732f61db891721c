"""A folder of task files, each loaded as every command and the code location load one: the files that load, and
those that do not with their error (config_text.py: never a credential). `cdc-assets check` reports both; the code
location runs the good ones and reports the others (defs/code_location.py)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cdc_assets.config import CONFIG_ENV, TaskConfig, load_config
from cdc_assets.core.urls import mask
from cdc_assets.errors import CdcError, ConfigError

TASK_FILE_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class TaskFile:
    path: Path
    config: TaskConfig


@dataclass(frozen=True)
class BadTaskFile:
    path: Path
    error: str  # says what is wrong and the way out; never a secret


def task_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in TASK_FILE_SUFFIXES)


def load_folder(folder: Path) -> tuple[list[TaskFile], list[BadTaskFile]]:
    """Every task file of `folder`, loaded; the files that fail, each with its error. Two files of one task_id
    are both bad: which one is meant cannot be guessed, and both would drive the same positions."""
    good: list[TaskFile] = []
    bad: list[BadTaskFile] = []
    for path in task_files(folder):
        try:
            good.append(TaskFile(path, load_config(path)))
        except CdcError as exc:
            bad.append(BadTaskFile(path, mask(str(exc))))
    by_id: dict[str, list[TaskFile]] = {}
    for task in good:
        by_id.setdefault(task.config.task_id, []).append(task)
    for task_id, tasks in by_id.items():
        if len(tasks) > 1:
            names = " and ".join(str(t.path) for t in tasks)
            for t in tasks:
                bad.append(BadTaskFile(t.path, f"task_id {task_id} is claimed by {names} -- give each task file its "
                                               "own task_id (it names the task's positions, assets and sensors)"))
            good = [t for t in good if t.config.task_id != task_id]
    return good, sorted(bad, key=lambda b: b.path)


def check(given: str | None) -> tuple[list[str], bool]:
    """One line per task file of `given` (a task file or a folder of them), `<file>: ok, task <task_id>` or
    `<file>: <error>`; and whether any is broken. A folder without task files is broken: CI checks a folder
    to have tasks in it."""
    if not given:
        raise ConfigError("no task file or folder to check", f"pass --config PATH_OR_DIR or set {CONFIG_ENV}")
    path = Path(given).expanduser().resolve()
    if path.is_dir():
        good, bad = load_folder(path)
        if not good and not bad:
            return [f"{path}: holds no task files ({', '.join('*' + s for s in TASK_FILE_SUFFIXES)})"], True
    else:
        try:
            good, bad = [TaskFile(path, load_config(path))], []
        except CdcError as exc:
            good, bad = [], [BadTaskFile(path, mask(str(exc)))]
    lines = {t.path: f"{t.path}: ok, task {t.config.task_id}" for t in good}
    lines.update((b.path, f"{b.path}: {' '.join(b.error.split())}") for b in bad)
    return [lines[p] for p in sorted(lines)], bool(bad)
