"""Two runs of one split (a UI materialization during a backfill, a retry while the first run lives): one holds
the split's lease in the target, the other waits and then skips it as finished, or gives up with a clear error."""
import threading

import pytest

from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import PhaseHooks, TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets.resumer.logfile import POSITION_LOG
from cdc_assets.sinks.staging import staging_table
from cdc_assets.core.tables import TableId
from cdc_assets.sinks.split_locks import SplitBusy
from cdc_assets_tests.support import config_for, fetch_rows, source_database

ROWS = 1000


def test_second_run_of_a_split_waits_for_the_first_and_never_reads_it_again(tmp_path, servers, spark, unique_name):
    target = f"{unique_name}_tgt"
    servers.postgres.create_database(target)
    seed = ["CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40))",
            f"INSERT INTO items SELECT seq, CONCAT('item ', seq) FROM seq_1_to_{ROWS}"]
    with source_database(servers, "mysql", unique_name, seed) as src:
        def runtime(hooks=None, timeout=600.0) -> TaskRuntime:
            config = config_for(tmp_path, servers, task_id="lease", source="mysql", source_db=unique_name,
                                tables=[f"{unique_name}.items"], target="postgres", target_db=target,
                                snapshot={"split_size": 500, "split_lock_timeout_secs": timeout})
            rt = TaskRuntime(config, hooks)
            rt.adopt_spark(spark)
            return rt

        a_holds, let_a_go, b_read = threading.Event(), threading.Event(), threading.Event()

        def pause_a(ids):
            a_holds.set()
            let_a_go.wait(60)

        rt_a = runtime(PhaseHooks(after_low=pause_a))
        [tp] = ensure_plans(rt_a)
        first = tp.plan.splits[0].id
        rt_b = runtime(PhaseHooks(after_low=lambda ids: b_read.set()))
        results = {}
        a = threading.Thread(target=lambda: results.update(a=snapshot_splits(rt_a, tp.plan.table, [first])))
        b = threading.Thread(target=lambda: results.update(b=snapshot_splits(rt_b, tp.plan.table, [first])))
        a.start()
        assert a_holds.wait(120)
        b.start()
        b_read.wait(5)  # without a lease, B would read the split now, while A holds it unfinished
        assert not b_read.is_set()

        rt_c = runtime(timeout=0)
        with pytest.raises(SplitBusy, match=f"split {first} is being snapshotted by another run"):
            snapshot_splits(rt_c, tp.plan.table, [first])
        rt_c.close()

        let_a_go.set()
        a.join(600)
        b.join(600)
        assert [r.skipped for r in results["a"]] == [False] and [r.skipped for r in results["b"]] == [True]
        assert not b_read.is_set()
        lows = [ln for ln in (rt_a.config.log_dir / POSITION_LOG).read_text().splitlines()
                if '"LOW_RECORDED"' in ln and f'"{first}"' in ln]
        assert len(lows) == 1
        rest = [s.id for s in tp.plan.splits[1:]]
        snapshot_splits(rt_b, tp.plan.table, rest)
        tgt = servers.postgres.connect(target)
        assert fetch_rows(tgt, f'"{unique_name}".items', "id") == fetch_rows(src, "items", "id")
        tgt.close()
        rt_a.close()
        rt_b.close()


def test_staging_tables_of_long_names_sharing_a_prefix_do_not_collide():
    q1 = staging_table(TableId("shop", "orders_archive_of_the_whole_company_2023_q1"), 0)
    q2 = staging_table(TableId("shop", "orders_archive_of_the_whole_company_2023_q2"), 0)
    assert q1 != q2 and max(len(q1.name), len(q2.name)) <= 63
    assert staging_table(TableId("shop", "t"), 3) != staging_table(TableId("shop", "t"), 4)
