"""Tables added to or removed from source.tables after the first checkpoint.

An added table waits while its snapshot runs (the others keep syncing, and move the checkpoint past the
added table's low watermarks), then joins from its own minimum low watermark: every change it had between
its snapshot and the task's checkpoint reaches the target. A removed table stops being applied, and says so.
"""
import pytest

from cdc_assets.core.positions import PgPosition, position_from_json
from cdc_assets.core.tables import TableId
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import PhaseHooks, TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets.sources.postgres.slot import slot_name, slot_state
from cdc_assets_tests.support import config_for, fetch_rows, snapshot_all, source_database

ROWS = 300


def seed(ns: str, kind: str) -> list[str]:
    fill = (f"SELECT seq, 0, 'seed' FROM seq_1_to_{ROWS}" if kind == "mysql"
            else f"SELECT g, 0, 'seed' FROM generate_series(1, {ROWS}) g")
    out = [] if kind == "mysql" else [f"CREATE SCHEMA {ns}"]
    for t in ("a", "b"):
        out += [f"CREATE TABLE {ns}.{t} (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20))",
                f"INSERT INTO {ns}.{t} {fill}"]
    return out


def write(conn, statements: list[str]) -> None:
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        for statement in statements:
            cur.execute(statement)
        cur.execute("COMMIT")


def changes(ns: str, table: str, round_: int) -> list[str]:
    """Updates spread over every split, a delete and an insert with a key of its own per round."""
    return [f"UPDATE {ns}.{table} SET v = v + 1, note = 'r{round_}' WHERE id % 7 = {round_ % 7}",
            f"DELETE FROM {ns}.{table} WHERE id = {10 + round_}",
            f"INSERT INTO {ns}.{table} VALUES ({1000 + round_}, {round_}, 'ins')"]


def rows(conn, ns: str, table: str) -> list[tuple]:
    return fetch_rows(conn, f"{ns}.{table}", "id")


@pytest.mark.parametrize("kind", ["mysql", "postgres"])
def test_added_table_joins_from_its_snapshot_and_removed_table_stops(tmp_path, servers, spark, unique_name, kind):
    ns = unique_name if kind == "mysql" else "app"
    target_db = f"{unique_name}_tgt"
    servers.postgres.create_database(target_db)
    tgt = servers.postgres.connect(target_db)
    tgt.autocommit = True

    def runtime(tables: list[str], **kwargs) -> TaskRuntime:
        config = config_for(tmp_path, servers, task_id=f"tc_{unique_name}", source=kind, source_db=unique_name,
                            tables=[f"{ns}.{t}" for t in tables], target="postgres", target_db=target_db,
                            snapshot={"split_size": 100}, pipeline={"checkpoint_after_events": 50})
        rt = TaskRuntime(config, **kwargs)
        rt.adopt_spark(spark)
        return rt

    with source_database(servers, kind, unique_name, seed(ns, kind)) as src:
        rt = runtime(["a"])
        snapshot_all(rt)
        sync(rt, until_caught_up=True)
        rt.close()

        # b enters the config: not planned yet, the log phase goes on for a and says b waits.
        write(src, changes(ns, "a", 1) + changes(ns, "b", 1))
        rt = runtime(["a", "b"])
        report = sync(rt, until_caught_up=True)
        assert report.waiting == [f"{ns}.b is not planned yet"]
        assert rows(tgt, ns, "a") == rows(src, ns, "a")

        # b is planned and half of it snapshotted; the others sync meanwhile, past b's low watermarks.
        rounds = iter(range(20, 40))  # one round of b changes after each group's high watermark
        after_high = PhaseHooks(after_high=lambda ids: write(src, changes(ns, "b", next(rounds))))
        rt.close()
        rt = runtime(["a", "b"], hooks=after_high)
        plan_b = {tp.plan.table: tp.plan for tp in ensure_plans(rt)}[TableId(ns, "b")]
        splits = [s.id for s in plan_b.splits]
        assert len(splits) >= 3
        snapshot_splits(rt, plan_b.table, splits[:2])
        write(src, changes(ns, "a", 3) + changes(ns, "b", 3))
        report = sync(rt, until_caught_up=True)
        assert report.waiting == [f"2/{len(splits)} splits of {ns}.b finished"] and report.joined == []
        lows = [position_from_json(r.position_data["low_watermark"]) for r in rt.resumer.finished().values()
                if r.position_data["tb"] == "b"]
        checkpoint = rt.resumer.checkpoint().position
        assert all(low.sort_key() < checkpoint.sort_key() for low in lows)  # the case that used to lose b's changes
        if kind == "postgres":
            # The slot still holds b's log: never acknowledged past where b was planned.
            conn = servers.postgres.connect(unique_name)
            try:
                state = slot_state(conn, slot_name(rt.config.task_id))
            finally:
                conn.close()
            assert state.confirmed_flush_lsn.lsn <= min(low.lsn for low in lows)
            assert isinstance(checkpoint, PgPosition)

        snapshot_splits(rt, plan_b.table, splits[2:])
        write(src, changes(ns, "a", 4) + changes(ns, "b", 4))
        report = sync(rt, until_caught_up=True)
        assert report.joined == [f"{ns}.b"] and report.waiting == []
        assert rows(tgt, ns, "b") == rows(src, ns, "b")
        assert rows(tgt, ns, "a") == rows(src, ns, "a")
        assert rt.resumer.checkpoint().ahead == {}
        again = sync(rt, until_caught_up=True)
        assert again.events == 0 and again.joined == []
        rt.close()

        # a leaves the config: its changes are no longer applied, b's still are.
        a_before = rows(tgt, ns, "a")
        write(src, changes(ns, "a", 5) + changes(ns, "b", 5))
        rt = runtime(["b"])
        report = sync(rt, until_caught_up=True)
        assert report.removed == [f"{ns}.a"]
        assert any("no longer applied" in line for line in report.lines())
        assert rows(tgt, ns, "a") == a_before != rows(src, ns, "a")
        assert rows(tgt, ns, "b") == rows(src, ns, "b")
        assert rt.plans.load(TableId(ns, "a")) is None
        assert set(rt.resumer.schemas(rt.resumer.checkpoint().schema_version)) == {TableId(ns, "b")}
        rt.close()
    tgt.close()
