"""PostgreSQL keeps the value the rows there before an ADD COLUMN got in `attmissingval` until a rewrite writes it
into every row and clears it; after that the catalog shows what an ADD without a default shows. The task keeps the
table's storage (relfilenodes) with its definitions: an ADD followed after a rewrite the task did not see stops,
naming the column; one whose table was rewritten only before the task last read it is followed (NULL)."""
from __future__ import annotations

import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.schema_changes import SchemaChangeHalted
from cdc_assets.sources.postgres.slot import drop_slot, slot_name
from cdc_assets_tests.support import config_for, execute, fetch_rows, postgres_target, source_database

# Each statement a step; None: a run follows what came before (its definitions and storage are read anew).
FOLLOWED_REWRITE = ("ALTER TABLE s.t ALTER v TYPE bigint", "INSERT INTO s.t VALUES (2, 2)", None,
                    "ALTER TABLE s.t ADD COLUMN w INT", "INSERT INTO s.t VALUES (3, 3, 3)")
# The retype is followed while the catalog already holds the ADD and the rewrite after it: the storage read then is
# the later rewrite's, so the one read before is kept.
LATER_REWRITE = ("ALTER TABLE s.t ALTER v TYPE bigint", "INSERT INTO s.t VALUES (2, 2)",
                 "ALTER TABLE s.t ADD COLUMN w INT DEFAULT 7", "INSERT INTO s.t VALUES (3, 3, 3)",
                 "ALTER TABLE s.t ALTER w DROP DEFAULT", "ALTER TABLE s.t ALTER v TYPE numeric(20)",
                 "INSERT INTO s.t VALUES (4, 4, 4)")

# An ADD without a default, then a rewrite: the rows there before got NULL, but the catalog and the log show what
# they show for an ADD DEFAULT 7 whose default was dropped before the rewrite. Telling them apart would need the
# rows: a stop, rather than a guess.
RETYPED_ADDED = ("ALTER TABLE s.t ADD COLUMN w INT", "INSERT INTO s.t VALUES (2, 2, 2)",
                 "ALTER TABLE s.t ALTER w TYPE bigint", "INSERT INTO s.t VALUES (3, 3, 3000000000)")


@pytest.mark.parametrize("steps, expected", [
    (FOLLOWED_REWRITE, [(1, 1, None), (2, 2, None), (3, 3, 3)]),
    (LATER_REWRITE, "w: the table was rewritten"),
    (RETYPED_ADDED, "w: the table was rewritten"),
])
def test_an_added_column_after_a_rewrite_is_filled_only_where_the_task_knows_what_the_rows_got(
        servers, unique_name, tmp_path, steps, expected):
    tgt = postgres_target(servers, f"{unique_name}_tgt")
    with source_database(servers, "postgres", unique_name, ["CREATE SCHEMA s", "CREATE TABLE s.t (id INT PRIMARY "
                                                             "KEY, v INT)", "INSERT INTO s.t VALUES (1, 1)"]) as src:
        rt = TaskRuntime(config_for(tmp_path, servers, task_id=unique_name, source="postgres", source_db=unique_name,
                                    tables=["s.t"], target="postgres", target_db=f"{unique_name}_tgt",
                                    pipeline={"startup_mode": "latest", "schema_change_policy": "apply_add_columns"}))
        try:
            rt.sink.ensure_table(rt.source.describe(rt.config.source.table_ids[0]))
            # as a snapshot would have left it; v wide enough for each retype, which is then followed
            execute(tgt, 'INSERT INTO "s".t VALUES (1, 1)', 'ALTER TABLE "s".t ALTER v TYPE numeric(30)')
            sync(rt, until_caught_up=True)
            for step in steps:
                if step is None:
                    sync(rt, until_caught_up=True)
                else:
                    execute(src, step)
            try:
                sync(rt, until_caught_up=True)
            except SchemaChangeHalted as stop:
                assert isinstance(expected, str) and expected in str(stop), stop
                assert "re-plan" in stop.hint or "replan" in stop.hint, stop.hint
                return
        finally:
            rt.close()
            drop_slot(src, slot_name(unique_name))
        assert fetch_rows(tgt, '"s".t', "id") == expected
    tgt.close()
