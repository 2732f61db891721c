"""SIGKILL a `sync` after the target committed a batch of PostgreSQL key moves whose TOASTed column the log left
out (REPLICA IDENTITY DEFAULT), before its checkpoint was stored (sqlite positions); rerun: the batch replays
over its own result, and the target must equal the source row by row. Into both target kinds."""
import os
import re
import secrets
import signal
import subprocess

import pytest

from cdc_assets.config import load_config
from cdc_assets.engine.faults import ENV as CRASH_ENV
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets_tests.support import cli_command, fetch_rows, run_transactions, source_database, write_config

pytestmark = pytest.mark.crash
BIG = secrets.token_hex(40_000)  # incompressible: stored out of line, so an update not touching it logs it unchanged

SWAP = ["UPDATE {t} SET id = 99 WHERE id = 40; UPDATE {t} SET id = 40 WHERE id = 50; "
        "UPDATE {t} SET id = 50 WHERE id = 99"]
# (rows at the checkpoint, the transactions of the batch the crash leaves committed but not checkpointed, and the
# pipeline settings beside the test's)
SCENARIOS = {
    "old key re-inserted": (
        [(1, BIG, 0)],
        ["UPDATE {t} SET id = 100 WHERE id = 1; INSERT INTO {t} VALUES (1, '" + BIG + "new', 5)"], {}),
    # Each new key freed earlier in the batch, each old key filled again: only the move mark tells a replay.
    "keys swapped through a third": ([(40, BIG + "40", 0), (50, BIG + "50", 0)], SWAP, {}),
    # Its first part (two moves, not positioned until the commit: marked by the part's floor) replayed alone
    # finds no row under the third key, which the rest moved on: the replay stops (see the test below).
    "keys swapped, in parts": ([(40, BIG + "40", 0), (50, BIG + "50", 0)], SWAP, {"transaction_part_events": 2}),
    # Its first part inserts both rows, its second swaps them: replayed, the first part writes the rows as inserted
    # over the swapped ones, so the rows under the new keys are no longer the moved ones.
    "rows inserted, then swapped in a later part": (
        [(1, BIG, 0)],
        ["INSERT INTO {t} VALUES (40, '" + BIG + "40', 0); INSERT INTO {t} VALUES (50, '" + BIG + "50', 0); "
         "UPDATE {t} SET n = 1 WHERE id = 1; " + SWAP[0]], {"transaction_part_events": 3}),
    # Committed as one batch; the rerun, with smaller batches, commits the rewrite of the new key in a batch of its
    # own first, which puts back what 50 held before the move, and the old key's row is gone: the replay stops.
    "new key rewritten, then a move into it, replayed in two batches": (
        [(40, BIG + "40", 0), (50, BIG + "50", 0)],
        ["UPDATE {t} SET doc = 'x' || doc WHERE id = 50",
         "DELETE FROM {t} WHERE id = 50; UPDATE {t} SET id = 50 WHERE id = 40"], {"checkpoint_after_events": 100}),
    "a chain into the old key, the moved row updated": (
        [(1, BIG, 0), (2, BIG + "2", 0)],
        ["UPDATE {t} SET id = 100 WHERE id = 1; UPDATE {t} SET id = 1 WHERE id = 2",
         "UPDATE {t} SET n = 7 WHERE id = 100"], {}),
}
# the replay cannot tell where the moved rows are: it stops, naming the move
STOPS = {"keys swapped, in parts": r"from key \(40,\) to \(99,\) at the transaction committed after \d+/[0-9A-F]+",
         "new key rewritten, then a move into it, replayed in two batches": r"from key \(40,\) to \(50,\) at \d+/"}
RERUN = {"new key rewritten, then a move into it, replayed in two batches": {"checkpoint_after_events": 1}}


def lengths(rows):
    """(key, length of doc, n): a readable difference, not two 80 KB strings."""
    return [(r[0], len(r[1] or ""), r[2]) for r in rows]


@pytest.mark.parametrize("target", ["postgres", "mysql"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_sigkill_after_the_commit_of_key_moves_replays_them_exactly(tmp_path, servers, unique_name, target,
                                                                    scenario):
    ns, target_db = unique_name, f"{unique_name}_tgt"
    seed, transactions, pipeline = SCENARIOS[scenario]
    table = f"{ns}.t"
    with source_database(servers, "postgres", unique_name,
                         [f"CREATE SCHEMA {ns}", f"CREATE TABLE {table} (id INT PRIMARY KEY, doc TEXT, n INT)"]) as src:
        if target == "postgres":
            servers.postgres.create_database(target_db)
            tgt, target_table = servers.postgres.connect(target_db), f'"{ns}".t'
        else:
            tgt, target_table = servers.mariadb.connect(), f"`{ns}`.t"
        path = write_config(tmp_path, servers, task_id=unique_name, source="postgres", source_db=unique_name,
                            tables=[table], target=target, target_db=target_db,
                            pipeline={"startup_mode": "latest", "checkpoint_interval_secs": 600,
                                      "max_batch_delay_ms": 5_000, **pipeline})
        try:
            rt = TaskRuntime(load_config(path))
            try:
                rt.sink.ensure_table(rt.source.describe(rt.config.source.table_ids[0]))
                sync(rt, until_caught_up=True)  # the slot and a first checkpoint
                with src.cursor() as cur:
                    for row in seed:
                        cur.execute(f"INSERT INTO {table} VALUES (%s, %s, %s)", row)
                sync(rt, until_caught_up=True)
                checkpoint = rt.resumer.checkpoint().position
            finally:
                rt.close()
            run_transactions(src, [t.format(t=table) for t in transactions])
            env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}

            killed = subprocess.run(cli_command(path, "sync", "--until-caught-up"), capture_output=True, text=True,
                                    env={**env, CRASH_ENV: "incremental.after_commit"}, timeout=300)
            assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-2000:]
            assert lengths(fetch_rows(tgt, target_table, "id")) == lengths(fetch_rows(src, table, "id"))  # committed
            rt = TaskRuntime(load_config(path))
            try:
                assert rt.resumer.checkpoint().position == checkpoint  # not stored: the batch is replayed
            finally:
                rt.close()

            if scenario in RERUN:
                path = write_config(tmp_path, servers, task_id=unique_name, source="postgres",
                                    source_db=unique_name, tables=[table], target=target, target_db=target_db,
                                    pipeline={"startup_mode": "latest", "checkpoint_interval_secs": 600,
                                              "max_batch_delay_ms": 5_000, **RERUN[scenario]})
            rerun = subprocess.run(cli_command(path, "sync", "--until-caught-up"), capture_output=True, text=True,
                                   env=env, timeout=300)

            out = rerun.stdout[-3000:] + rerun.stderr[-3000:]
            if scenario in STOPS:
                assert rerun.returncode not in (0, -signal.SIGKILL), out
                assert re.search(rf"cannot move the row of {ns}\.t {STOPS[scenario]}.*: .*applied the move before"
                                 r".*REPLICA IDENTITY FULL", out), out
                return
            assert rerun.returncode == 0, out
            got, want = fetch_rows(tgt, target_table, "id"), fetch_rows(src, table, "id")
            assert lengths(got) == lengths(want)
            assert got == want
        finally:
            if target == "mysql":
                with tgt.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS `{ns}`")
            tgt.close()
