"""Exactly-once backfills of different split groups run at once (Dagster runs snapshot partitions in parallel):
each replays its window through its own binlog connection, which the server tells apart by server_id."""
import threading

from cdc_assets.core.positions import MysqlPosition
from cdc_assets.engine.backfill import backfill
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets_tests.support import config_for, fetch_rows, source_database

SEED = ["CREATE TABLE items (id INT PRIMARY KEY, v INT)", "INSERT INTO items SELECT seq, 0 FROM seq_1_to_100"]


def binlog_dumps(conn) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
        return cur.fetchone()[0]


def test_concurrent_backfills_do_not_kick_each_other_off(tmp_path, servers, unique_name, pg_target):
    with source_database(servers, "mysql", unique_name, SEED) as src:
        config = config_for(tmp_path, servers, task_id=f"bf_{unique_name}", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.items"], target="postgres", target_db=pg_target[0],
                            snapshot={"split_size": 50}, pipeline={"exactly_once": True},
                            resumer={"resume_type": "from_target"})
        runtimes = [TaskRuntime(config), TaskRuntime(config)]  # two snapshot runs, as two Dagster processes
        (planned,) = ensure_plans(runtimes[0])
        plan, schema = planned.plan, planned.schema
        assert len(plan.splits) == 2
        with pg_target[1].cursor() as cur:
            cur.execute(f'INSERT INTO "{unique_name}".items SELECT g, 0 FROM generate_series(1, 100) g')
        before = binlog_dumps(src)
        low = runtimes[0].source.current_position()
        with src.cursor() as cur:
            cur.execute("UPDATE items SET v = 1 WHERE id IN (10, 90)")  # one row in each split's range
        end = runtimes[0].source.current_position()
        high = MysqlPosition(end.file, end.pos + 1)  # not written yet: both backfills wait for it, connected
        errors: list[BaseException] = []

        def run(rt: TaskRuntime, split) -> None:
            try:
                with rt.sink.transaction() as cur:
                    backfill(rt, cur, schema, plan, [split], low, high)
            except BaseException as exc:  # noqa: BLE001 -- reported by the test thread
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(rt, s)) for rt, s in zip(runtimes, plan.splits)]
        for t in threads:
            t.start()
        # Both readers connected (or one already thrown off, as when both use one server_id).
        while binlog_dumps(src) < before + 2 and not errors and all(t.is_alive() for t in threads):
            threading.Event().wait(0.05)
        with src.cursor() as cur:
            cur.execute("UPDATE items SET v = 2")  # after the high watermark: not the backfills' to apply
        for t in threads:
            t.join()
        for rt in runtimes:
            rt.close()

        assert errors == []
        assert fetch_rows(pg_target[1], f'"{unique_name}".items', "id") == [(i, int(i in (10, 90))) for i in range(1, 101)]
