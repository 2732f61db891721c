"""`cdc-assets check`: what CI runs on a folder of task files, where the code location itself loads with a broken
file (its other tasks keep running). One line per file, the error masked, exit 2 while any file is broken."""
import os
import subprocess
import sys

import yaml

from cdc_assets_tests.unit.test_config_secrets import GOOD, PASSWORD


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cdc_assets.cli", *args], capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if k != "CDC_ASSETS_CONFIG"})


def test_check_reports_each_task_file_and_fails_while_one_is_broken(tmp_path):
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "a_good.yaml").write_text(GOOD.replace("TASK_ID", "good"))
    (folder / "b_broken.yaml").write_text(GOOD.replace("TASK_ID", "broken") + f"  password: {PASSWORD}: x\n")
    typo = yaml.safe_load(GOOD.replace("TASK_ID", "typo"))
    typo["snapshot"] = {"split_sise": 10}
    (folder / "c_typo.yml").write_text(yaml.safe_dump(typo))
    (folder / "notes.txt").write_text("not a task file")

    done = check("check", "--config", str(folder))
    assert done.returncode == 2, done.stdout + done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        f"{folder / 'a_good.yaml'}: ok, task good",
        f"{folder / 'b_broken.yaml'}: config file {folder / 'b_broken.yaml'} is not valid YAML: mapping values are "
        "not allowed here (line 9, column 23) -- fix the file at that line (indentation with spaces, quotes closed, "
        "`key: value`)",
        f"{folder / 'c_typo.yml'}: invalid config: snapshot.split_sise: unknown key -- fix the key named above; see "
        "docs/reference/config.md"], done.stdout
    assert done.stderr == ""

    single = check("--config", str(folder / "c_typo.yml"), "check")  # the global --config names it too
    assert single.returncode == 2 and single.stdout.count("\n") == 1 and "split_sise" in single.stdout

    (folder / "b_broken.yaml").unlink()
    (folder / "c_typo.yml").write_text(GOOD.replace("TASK_ID", "typo"))
    fixed = check("check", "--config", str(folder))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.splitlines() == [f"{folder / 'a_good.yaml'}: ok, task good",
                                         f"{folder / 'c_typo.yml'}: ok, task typo"]


def test_check_fails_on_an_empty_folder_and_a_missing_path(tmp_path):
    empty = check("check", "--config", str(tmp_path))
    assert empty.returncode == 2 and "holds no task files" in empty.stdout
    missing = check("check", "--config", str(tmp_path / "missing.yaml"))
    assert missing.returncode == 2 and "does not exist" in missing.stdout
    nothing = check("check")
    assert nothing.returncode == 2 and "no task file or folder to check" in nothing.stderr
