"""SIGKILL of `sync` while it follows a MongoDB writer, then a rerun: once caught up, the PostgreSQL target equals
the source row by row (at-least-once: resumed from the last checkpointed resume token, the upsert makes it exact).

Needs a replica set (CDC_TEST_MONGO_URL); written by reading, never run on the project's machines."""
import os
import random
import signal
import subprocess
import threading
import time

import pytest

from cdc_assets_tests.mongo_support import actual, client, collection, config, document, expected
from cdc_assets_tests.support import cli_command, mongo, postgres_target

pytestmark = [mongo, pytest.mark.crash, pytest.mark.spark]
ROWS = 2_000


class Writer(threading.Thread):
    """Multi-document transactions of updates, inserts and deletes, until stopped."""

    def __init__(self, mongo_client, database: str) -> None:
        super().__init__(daemon=True)
        self.client, self.orders = mongo_client, collection(mongo_client, database, "orders")
        self.rng, self.next_id, self.transactions = random.Random(3), ROWS + 1, 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            with self.client.start_session() as session:
                session.with_transaction(self._transaction)
            self.transactions += 1

    def _transaction(self, session) -> None:
        for _ in range(self.rng.randint(1, 5)):
            roll, some = self.rng.random(), self.rng.randint(1, self.next_id)
            if roll < 0.6:
                self.orders.update_many({"_id": {"$gte": some, "$lt": some + 3}}, {"$inc": {"n": 1}}, session=session)
            elif roll < 0.85:
                self.orders.insert_one(document(self.next_id, self.rng), session=session)
                self.next_id += 1
            else:
                self.orders.delete_one({"_id": some}, session=session)


def cli(path, *args):
    return subprocess.Popen(cli_command(path, *args), start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def ok(proc, timeout=900) -> None:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-3000:]


def test_sigkill_of_sync_mid_stream_then_rerun_loses_nothing(tmp_path, servers, unique_name):
    rng, mongo_client = random.Random(5), client()
    collection(mongo_client, unique_name, "orders").insert_many([document(i, rng) for i in range(1, ROWS + 1)])
    collection(mongo_client, unique_name, "events").insert_one({"_id": 1})
    target = postgres_target(servers, f"{unique_name}_tgt")
    path = config(tmp_path, servers, unique_name, f"{unique_name}_tgt",
                  pipeline={"checkpoint_after_events": 50, "checkpoint_interval_secs": 1})
    writer = Writer(mongo_client, unique_name)
    try:
        ok(cli(path, "plan"))
        ok(cli(path, "snapshot"))
        writer.start()
        proc = cli(path, "sync")
        time.sleep(10)  # caught up, then following the writer, checkpoints behind it
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(2)
        writer.stop.set()
        writer.join()
        assert writer.transactions > 50
        ok(cli(path, "sync", "--until-caught-up"))
        for name in ("orders", "events"):
            assert actual(target, unique_name, name) == expected(mongo_client, unique_name, name)
    finally:
        writer.stop.set()
        target.close()
        mongo_client.drop_database(unique_name)
        mongo_client.close()
