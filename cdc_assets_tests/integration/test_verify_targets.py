"""Verification of a task with three targets (two PostgreSQL databases, one MariaDB database): each target is
verified on its own, against its own checkpoint, and its results are its own; a row corrupted in one target fails
that target's split only, and materializing the split again repairs that target."""
import subprocess

from cdc_assets.config import load_config
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.verify import FAILED, PASSED, verify_table
from cdc_assets_tests.support import cli_command, fetch_rows, snapshot_all, three_targets

ROWS = 60
CORRUPT = 25


def test_each_of_three_targets_is_verified_and_repaired_on_its_own(tmp_path, servers, mariadb_target, unique_name,
                                                                   spark):
    db = unique_name
    servers.mariadb.create_database(db)
    src = servers.mariadb.connect(db)
    with src.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.execute(f"INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_{ROWS}")
    path = three_targets(tmp_path, servers, mariadb_target, db, f"three_{db}", snapshot={"split_size": 20})
    rt = TaskRuntime(load_config(path))
    rt.adopt_spark(spark)
    pg_b = servers.postgres.connect(f"{db}_b")
    try:
        snapshot_all(rt)
        with src.cursor() as cur:
            cur.execute("UPDATE t SET v = 'changed' WHERE id = 1")
        sync(rt, until_caught_up=True)
        table = rt.config.source.table_ids[0]
        splits = [s.id for s in rt.plans.load(table).splits]
        bad = next(s.id for s in rt.plans.load(table).splits if s.range.start is not None
                   and s.range.start <= CORRUPT and (s.range.end is None or CORRUPT < s.range.end))

        def verdicts() -> dict[str, dict[str, str]]:
            return {lane.name: {c.split_id: c.status for c in verify_table(lane, table, wait_secs=30)}
                    for lane in rt.lanes}

        assert verdicts() == {name: {s: PASSED for s in splits} for name in ("pg_a", "pg_b", "maria")}
        with pg_b.cursor() as cur:
            cur.execute(f'UPDATE "{db}".t SET v = %s WHERE id = %s', ("corrupted", CORRUPT))
        found = verdicts()
        assert found["pg_b"] == {s: FAILED if s == bad else PASSED for s in splits}, found
        assert found["pg_a"] == found["maria"] == {s: PASSED for s in splits}, found

        cli = subprocess.run(cli_command(path, "verify", "--wait", "30"), capture_output=True, text=True, timeout=300)
        assert cli.returncode == 1, cli.stdout + cli.stderr
        assert f"{bad} in pg_b: FAILED" in cli.stdout and f"{bad} in pg_a: PASSED" in cli.stdout, cli.stdout
        only_a = subprocess.run(cli_command(path, "verify", "--target", "pg_a", "--target", "maria", "--wait", "30"),
                                capture_output=True, text=True, timeout=300)
        assert only_a.returncode == 0 and "pg_b" not in only_a.stdout, only_a.stdout + only_a.stderr
        unknown = subprocess.run(cli_command(path, "verify", "--target", "pg_c"), capture_output=True, text=True,
                                 timeout=300)
        assert unknown.returncode == 2 and "not a target of task" in unknown.stderr, unknown.stderr

        snapshot_all(rt)  # a materialization of every split: only pg_b's failed one is read again, into pg_b
        assert fetch_rows(pg_b, f'"{db}".t', "id") == fetch_rows(src, "t", "id")
        assert verdicts() == {name: {s: PASSED for s in splits} for name in ("pg_a", "pg_b", "maria")}
    finally:
        pg_b.close()
        rt.close()
        with src.cursor() as cur:
            cur.execute(f"DROP DATABASE `{db}`")
        src.close()
