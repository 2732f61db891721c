"""A split read again replaces its key range in the target: rows the source deleted since the earlier read go,
rows of other splits stay, whatever the target's collation thinks of the key order."""
import pytest

from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets_tests.support import config_for, fetch_rows, source_database

# Text keys mix cases so that MariaDB's case-insensitive order and PostgreSQL's differ around split boundaries.
KEYS = {"int": ("INT", "seq"), "text": ("VARCHAR(20)", "CONCAT(ELT(1 + seq % 3, 'a', 'B', 'c'), LPAD(seq, 5, '0'))")}


@pytest.mark.parametrize("key", ["int", "text"])
def test_replan_then_snapshot_removes_rows_deleted_at_the_source(tmp_path, servers, spark, unique_name, key):
    declared, expr = KEYS[key]
    seed = [f"CREATE TABLE t (id {declared} PRIMARY KEY, v INT)", f"INSERT INTO t SELECT {expr}, seq FROM seq_1_to_2000"]
    target = f"{unique_name}_tgt"
    servers.postgres.create_database(target)
    with source_database(servers, "mysql", unique_name, seed) as src:
        config = config_for(tmp_path, servers, task_id="resnap", source="mysql", source_db=unique_name,
                            tables=[f"{unique_name}.t"], target="postgres", target_db=target,
                            snapshot={"split_size": 300})
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        try:
            [tp] = ensure_plans(rt)
            snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
            with src.cursor() as cur:
                cur.execute("DELETE FROM t WHERE v % 7 = 0")
                cur.execute("UPDATE t SET v = -v WHERE v % 11 = 0")
            [tp] = ensure_plans(rt, replan=True)
            snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
        finally:
            rt.close()
        tgt = servers.postgres.connect(target)
        assert sorted(fetch_rows(tgt, f'"{unique_name}".t', "id")) == sorted(fetch_rows(src, "t", "id"))
        tgt.close()
