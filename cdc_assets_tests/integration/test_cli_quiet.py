"""The CLI prints what it did and nothing else: no library warnings (Dagster's beta/preview warnings, Spark's
log-level banner, py4j's chatter) unless `--verbose`. Checked on the real CLI's stderr, in a process of its own."""
import re
import subprocess

import pytest

from cdc_assets_tests.support import cli_command, execute, postgres_target, source_database, write_config

pytestmark = pytest.mark.spark  # `snapshot` starts Spark in the CLI's process
NOISE = re.compile(r"\w+Warning:|Setting default log level|setLogLevel|py4j|incubator modules|NativeCodeLoader|log4j")


def run(path, *args) -> subprocess.CompletedProcess:
    done = subprocess.run(cli_command(path, *args), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def test_the_cli_prints_no_library_warnings_unless_verbose(tmp_path, servers, unique_name):
    target = f"{unique_name}_tgt"
    postgres_target(servers, target).close()
    with source_database(servers, "mysql", unique_name, ["CREATE TABLE t (id INT PRIMARY KEY, v INT)",
                                                         "INSERT INTO t SELECT seq, seq FROM seq_1_to_300"]) as src:
        path = write_config(tmp_path, servers, task_id="quiet", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target="postgres", target_db=target,
                            snapshot={"split_size": 100})
        quiet = {args: run(path, *args) for args in [("plan",), ("snapshot",)]}
        execute(src, "UPDATE t SET v = -v WHERE id <= 5")
        quiet[("sync", "--until-caught-up")] = run(path, "sync", "--until-caught-up")
        for args, done in quiet.items():
            noise = [line for line in done.stderr.splitlines() if NOISE.search(line)]
            assert not noise, f"{' '.join(args)} printed library noise:\n" + "\n".join(noise[:20])
        assert "3/3 splits finished" in quiet[("snapshot",)].stdout
        assert "applied 5 changes" in quiet[("sync", "--until-caught-up")].stdout

        # The same detection sees the warnings when asked for them: the quiet runs above did not just miss them.
        run(path, "plan", "--replan")  # every split to read again: the verbose snapshot starts Spark
        verbose = run(path, "--verbose", "snapshot")
        assert NOISE.search(verbose.stderr), verbose.stderr[-3000:]
