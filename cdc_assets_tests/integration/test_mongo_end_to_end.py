"""MongoDB -> private PostgreSQL through the CLI, as a user runs it: `plan`, `snapshot`, changes while nothing
runs, `sync --until-caught-up`; the target equals the source row by row (documents converted as values.py does).

Needs a replica set (CDC_TEST_MONGO_URL); written by reading pymongo's and MongoDB's documentation, never run on
the project's machines (no MongoDB there)."""
import random
import subprocess

import pytest

from cdc_assets_tests.mongo_support import actual, client, collection, config, document, expected
from cdc_assets_tests.support import cli_command, mongo, postgres_target

pytestmark = [mongo, pytest.mark.spark]
ROWS = 1_000


def run(path, *args) -> str:
    done = subprocess.run(cli_command(path, *args), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_plan_snapshot_and_sync_make_the_target_equal_the_source(tmp_path, servers, unique_name):
    rng, mongo_client = random.Random(12), client()
    orders, events = collection(mongo_client, unique_name, "orders"), collection(mongo_client, unique_name, "events")
    orders.insert_many([document(i, rng) for i in range(1, ROWS + 1)])
    events.insert_many([{"_id": i, "kind": "seed", "at": document(i, rng)["placed"]} for i in range(1, 50)])
    target = postgres_target(servers, f"{unique_name}_tgt")
    path = config(tmp_path, servers, unique_name, f"{unique_name}_tgt")
    try:
        planned = run(path, "plan")
        assert "oplog window" in planned
        run(path, "snapshot")
        for name in ("orders", "events"):
            assert actual(target, unique_name, name) == expected(mongo_client, unique_name, name)

        orders.update_many({"_id": {"$lte": 100}}, {"$inc": {"n": 1}, "$set": {"name": "changed\nline"}})
        orders.delete_many({"_id": {"$gt": ROWS - 50}})
        orders.insert_many([document(i, rng) for i in range(ROWS + 1, ROWS + 101)])
        with mongo_client.start_session() as session:
            session.with_transaction(lambda s: (orders.delete_one({"_id": 500}, session=s),
                                                events.insert_one({"_id": 500, "moved": True}, session=s)))
        run(path, "sync", "--until-caught-up")

        for name in ("orders", "events"):
            assert actual(target, unique_name, name) == expected(mongo_client, unique_name, name)
    finally:
        target.close()
        mongo_client.drop_database(unique_name)
        mongo_client.close()
