"""A password written into a task file never shows in what a broken file makes the tools say: the CLI's output, the
code location's metadata, the error sensor's description and evaluation. Each kind of config error, on the CLI as
an operator runs it and on the folder of task files `dagster dev` loads."""
import os
import subprocess

import dagster as dg
import pytest

from cdc_assets.defs.code_location import code_location, error_sensor_name
from cdc_assets_tests.support import cli_command

PASSWORD = "Hunter2-pw"
GOOD = f"""task_id: TASK_ID
source:
  db_type: mysql
  url: mysql://cdc:{PASSWORD}@127.0.0.1:1
  tables: [shop.orders]
target:
  db_type: postgres
  url: postgresql://app:{PASSWORD}@127.0.0.1:1/warehouse
"""
ENV = {"CDC_TEST_TOKEN": PASSWORD, "CDC_TEST_SLASHED_PW": f"pa/{PASSWORD}"}

# name: (the broken file's text, what its error must still say)
BROKEN = {
    "yaml_unclosed_quote": (GOOD.replace("url: mysql", 'url: "mysql'), "line 4, column 8"),
    "yaml_mapping_in_a_value": (GOOD + f"  password: {PASSWORD}: x\n", "mapping values are not allowed here (line 9"),
    "yaml_tab": (GOOD + f"\tpassword: {PASSWORD}\n", "cannot start any token (line 9, column 1)"),
    "yaml_flow_mapping": (GOOD + f"spark: {{conf: {{spark.remote: {PASSWORD}]\n", "expected ',' or '}'"),
    "pydantic_value_from_env": (GOOD + "spark:\n  conf:\n    spark.remote: ${CDC_TEST_TOKEN}\n",
                                "spark.remote must be a Spark Connect URL"),
    "url_password_with_a_slash": (GOOD.replace(f"cdc:{PASSWORD}@127.0.0.1:1", f"cdc:pa/{PASSWORD}@127.0.0.1:1")
                                  .replace("db_type: mysql", "db_type: postgres"), "db_type is postgres"),
    "env_substituted_url_port": (GOOD.replace(f"cdc:{PASSWORD}@127.0.0.1:1", "cdc:${CDC_TEST_SLASHED_PW}@127.0.0.1:99999"),
                                 "port 99999 out of range"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_task_file_never_shows_its_password(tmp_path, monkeypatch, case):
    text, says = BROKEN[case]
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "good.yaml").write_text(GOOD.replace("TASK_ID", "good"))
    broken = folder / "broken.yaml"
    broken.write_text(text.replace("TASK_ID", "broken"))
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)

    done = subprocess.run(cli_command(broken, "positions"), capture_output=True, text=True, timeout=120,
                          env={**os.environ, **ENV})
    assert done.returncode == 2, done.stdout + done.stderr
    assert PASSWORD not in done.stdout + done.stderr, done.stderr
    assert says in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr

    defs = code_location(str(folder))
    report = defs.metadata["task_files_not_loaded"].value
    assert "broken.yaml" in report and says in report, report
    sensor = defs.get_sensor_def(error_sensor_name(broken))
    with dg.instance_for_test() as instance:
        with pytest.raises(Exception) as raised:
            sensor(dg.build_sensor_context(instance=instance, definitions=defs))
    evaluation = str(raised.value)
    assert says in evaluation, evaluation
    for shown in (str(defs.metadata), sensor.description, evaluation):
        assert PASSWORD not in shown, shown
