"""A source password never reaches CLI output, errors, Dagster's event log or metadata, or positions."""
import os
import subprocess

import dagster as dg
import pytest

from cdc_assets_tests.support import cli_command, write_config

pytestmark = pytest.mark.spark  # `cdc-assets snapshot` in a process of its own

SECRET = "Pw-9f3c-NeverPrintMe"
WRONG = "Wrong-Pw-77aa-NeverPrintMe"


def cli(config, env, *args):
    done = subprocess.run(cli_command(config, *args), env=env, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr


def test_password_stays_out_of_everything_a_user_sees(tmp_path, servers, unique_name):
    servers.mariadb.create_database(unique_name)
    conn = servers.mariadb.connect(unique_name)
    with conn.cursor() as cur:
        cur.execute(f"CREATE USER '{unique_name}'@'127.0.0.1' IDENTIFIED BY '{SECRET}'")
        cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{unique_name}'@'127.0.0.1'")
        cur.execute("CREATE TABLE s (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("INSERT INTO s SELECT seq, 'x' FROM seq_1_to_50")
    servers.postgres.create_database(f"{unique_name}_tgt")
    config = write_config(tmp_path, servers, task_id="secrets", source="mysql", source_db=unique_name,
                          tables=[f"{unique_name}.s"], target="postgres", target_db=f"{unique_name}_tgt")
    text = config.read_text().replace(f"{servers.mariadb.user}:{servers.mariadb.password}@",
                                      f"{unique_name}:${{CDC_TEST_SECRET}}@")
    config.write_text(text)
    home = tmp_path / "dagster_home"
    env = {**os.environ, "DAGSTER_HOME": str(home), "CDC_TEST_SECRET": SECRET}

    outputs = [cli(config, env, "plan"), cli(config, env, "snapshot"), cli(config, env, "positions")]
    assert [code for code, _ in outputs] == [0, 0, 0], outputs
    wrong_code, wrong_out = cli(config, {**env, "CDC_TEST_SECRET": WRONG}, "plan")
    assert wrong_code == 2 and "cannot connect to mysql://" in wrong_out and ":***@" in wrong_out
    for _, out in outputs + [(wrong_code, wrong_out)]:
        assert SECRET not in out and WRONG not in out

    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        assert runs
        for run in runs:
            for entry in instance.all_logs(run.run_id):
                assert SECRET not in str(entry)
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    conn.close()
