"""SIGKILL of `cdc-assets sync` between two parts of a transaction applied in parts: the target holds none of
the transaction (its parts were never committed), and the rerun applies all of it from the checkpoint."""
import os

import pytest

from cdc_assets.config import load_config
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets_tests.crash.test_incremental_crash import cli, killed_by_itself, ok
from cdc_assets_tests.integration.test_huge_transaction import (BIG_TX_CHANGES, PART, assert_same, big_rows,
                                                                big_transaction, in_one_transaction, seed, table,
                                                                target_db)
from cdc_assets_tests.support import fetch_rows, source_database, write_config

pytestmark = pytest.mark.crash


@pytest.mark.parametrize("kind, target_kind, resumer", [
    ("mysql", "postgres", "from_target"),
    ("postgres", "mysql", "from_target"),
    ("mysql", "postgres", "sqlite"),  # the checkpoint after the commit: nothing was committed either
])
def test_sigkill_between_parts_leaves_none_of_the_transaction(tmp_path, servers, unique_name, kind, target_kind,
                                                              resumer):
    tgt_name = f"{unique_name}_tgt"
    tgt = target_db(servers, target_kind, tgt_name)
    with source_database(servers, kind, unique_name, seed(kind, unique_name)) as conn:
        path = write_config(tmp_path, servers, task_id=f"c_{unique_name}", source=kind, source_db=unique_name,
                            tables=[f"{unique_name}.t"], target=target_kind, target_db=tgt_name,
                            resumer={"resume_type": resumer},
                            pipeline={"startup_mode": "latest", "transaction_part_events": PART})
        rt = TaskRuntime(load_config(path))
        try:
            ensure_plans(rt)  # the target table (and for PostgreSQL the slot)
        finally:
            rt.close()
        env = dict(os.environ)
        ok(cli(path, env, "sync", "--until-caught-up"))  # the checkpoint: the log end, before what follows
        in_one_transaction(conn, [big_rows(kind, unique_name)])
        ok(cli(path, env, "sync", "--until-caught-up"))
        before = fetch_rows(tgt, table(target_kind, unique_name), "id")
        assert len(before) == 10
        in_one_transaction(conn, big_transaction(kind, unique_name))

        killed_by_itself(cli(path, env, "sync", "--until-caught-up", crash="incremental.part_applied:5"))
        assert fetch_rows(tgt, table(target_kind, unique_name), "id") == before

        out = ok(cli(path, env, "sync", "--until-caught-up"))
        assert f"applied {BIG_TX_CHANGES} changes in 1 transactions" in out, out[-3000:]
        assert_same(conn, table(kind, unique_name), tgt, table(target_kind, unique_name))
    tgt.close()
