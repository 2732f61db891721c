"""A paced split read (`verify.rows_per_second`) fetches the same rows as an unpaced one, from a server-side
cursor in chunks at the rate, on both SQL sources."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from cdc_assets.core.splits import KeyRange
from cdc_assets.dbapi.connect import connect
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.sources import split_read
from cdc_assets_tests.support import config_for, source_database

ROWS = 1_000
SEED = {"mysql": ["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
                  f"INSERT INTO t SELECT seq, concat('v', seq) FROM seq_1_to_{ROWS}"],
        "postgres": ["CREATE SCHEMA app", "CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20))",
                     f"INSERT INTO app.t SELECT i, 'v' || i FROM generate_series(1, {ROWS}) AS s(i)"]}


class Clock:
    """Time that passes 1 ms per look and by what is slept, nothing else."""

    def __init__(self) -> None:
        self.now = 0.0

    def look(self) -> float:
        self.now += 0.001
        return self.now

    def sleep(self, secs: float) -> None:
        self.now += secs


@pytest.mark.parametrize("kind", ["mysql", "postgres"])
def test_a_paced_read_fetches_the_same_rows_in_chunks_at_the_rate(tmp_path, servers, unique_name, kind, monkeypatch):
    with source_database(servers, kind, unique_name, SEED[kind]):
        table = f"{unique_name}.t" if kind == "mysql" else "app.t"
        rt = TaskRuntime(config_for(tmp_path, servers, task_id="paced_read", source=kind, source_db=unique_name,
                                    tables=[table], target="postgres", target_db=f"{unique_name}_tgt"))
        try:
            schema = rt.source.describe(rt.config.source.table_ids[0])
        finally:
            rt.close()
        url, whole, versions = rt.config.source.db_url, KeyRange(None, None), kind == "postgres"
        plain = split_read.read_range(url, schema, whole, "int", versions=versions)

        clock, slept = Clock(), []
        # The module's `time` only: other threads of the test process keep the real clock.
        monkeypatch.setattr(split_read, "time", SimpleNamespace(
            sleep=lambda secs: (slept.append(secs), clock.sleep(secs)), monotonic=clock.look))
        paced = split_read.read_range(url, schema, whole, "int", versions=versions, rows_per_second=2_000)

    assert paced == plain and len(plain.rows) == ROWS
    # 100-row chunks at 2,000 rows/s: a sleep after each, 0.5 s in all less the clock's own ticks
    assert len(slept) == ROWS // 100 and 0.45 < sum(slept) <= 0.5, slept


def test_row_versions_are_read_again_with_the_keys_alone_and_tell_every_changed_key(tmp_path, servers, unique_name,
                                                                                  pg_target):
    """The window's second read on PostgreSQL: the keys (as the comparison renders them) and their versions, not
    the rows again; an updated, a deleted and an inserted key are the changed ones, and no other."""
    with source_database(servers, "postgres", unique_name, SEED["postgres"]) as conn:
        rt = TaskRuntime(config_for(tmp_path, servers, task_id="versions_read", source="postgres",
                                    source_db=unique_name, tables=["app.t"], target="postgres",
                                    target_db=f"{unique_name}_tgt"))
        try:
            schema = rt.source.describe(rt.config.source.table_ids[0])
            select = rt.source.compared_columns(schema, rt.sink.target_format())
        finally:
            rt.close()
        url, whole = rt.config.source.db_url, KeyRange(None, None)
        full = split_read.read_range(url, schema, whole, "int", select, versions=True)
        keys = split_read.read_range(url, schema, whole, "int", select, versions=True, keys_only=True)
        with conn.cursor() as cur:
            cur.execute("UPDATE app.t SET v = 'moved' WHERE id = 10")
            cur.execute("DELETE FROM app.t WHERE id = 20")
            cur.execute(f"INSERT INTO app.t VALUES ({ROWS + 1}, 'new')")
        changed = split_read.changed_versions(url, schema, whole, "int", select, full.versions)
        # As verification reads: on the source's open connection (left open for the next read), and paced.
        held = connect(url)
        try:
            on_held = split_read.changed_versions(url, schema, whole, "int", select, full.versions, held)
            again = split_read.read_range(url, schema, whole, "int", select, versions=True, conn=held)
            paced = split_read.changed_versions(url, schema, whole, "int", select, full.versions, held, 50_000)
            assert held.autocommit and not held.closed and held.get_transaction_status() == 0  # idle, as lent
        finally:
            held.close()

    assert keys.versions == full.versions and len(keys.versions) == ROWS
    assert {len(r) for r in keys.rows} == {1} and len(full.rows[0]) == 2
    assert changed == on_held == paced == {(10,), (20,), (ROWS + 1,)}
    assert len(again.rows) == ROWS
