"""A captured table renamed on the source: the sync stops naming the new name and the way out, and the way out
(the new name in source.tables in place of the old) ends with the target table of the new name equal to the
source. The stop used to name a re-plan, which looks for the old name and cannot find it. A column added before
the rename is met first: following it reads the table by its old name, which is gone, and the stop says a later
DDL renamed or dropped the table, with the same way out (the error said only "does not exist")."""
from __future__ import annotations

import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.errors import CdcError
from cdc_assets.sources.postgres.slot import drop_slot, slot_name
from cdc_assets_tests.support import config_for, execute, fetch_rows, postgres_target, snapshot_all, source_database

pytestmark = pytest.mark.spark

RENAME = {"mysql": "RENAME TABLE {ns}.t TO {ns}.t_new", "postgres": "ALTER TABLE {ns}.t RENAME TO t_new"}


@pytest.mark.parametrize("added_first", [False, True])
@pytest.mark.parametrize("source", ["mysql", "postgres"])
def test_a_renamed_table_s_stop_names_a_way_out_that_ends_equal(servers, unique_name, tmp_path, spark, source,
                                                                added_first):
    ns = unique_name if source == "mysql" else "s"
    seed = [] if source == "mysql" else [f"CREATE SCHEMA {ns}"]
    seed += [f"CREATE TABLE {ns}.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO {ns}.t VALUES (1, 1), (2, 2), (3, 3)"]
    tgt = postgres_target(servers, f"{unique_name}_tgt")

    def runtime(table: str) -> TaskRuntime:
        rt = TaskRuntime(config_for(tmp_path, servers, task_id=unique_name, source=source, source_db=unique_name,
                                    tables=[f"{ns}.{table}"], target="postgres", target_db=f"{unique_name}_tgt",
                                    pipeline={"schema_change_policy": "apply_add_columns"}))
        rt.adopt_spark(spark)
        return rt

    with source_database(servers, source, unique_name, seed) as src:
        try:
            rt = runtime("t")
            try:
                snapshot_all(rt)
                sync(rt, until_caught_up=True)
            finally:
                rt.close()
            if added_first:  # a row change after the ADD: PostgreSQL's log carries the change with it
                execute(src, f"ALTER TABLE {ns}.t ADD COLUMN w INT DEFAULT 7", f"UPDATE {ns}.t SET w = 30 WHERE id = 3")
            execute(src, RENAME[source].format(ns=ns), f"UPDATE {ns}.t_new SET v = 20 WHERE id = 2",
                    f"INSERT INTO {ns}.t_new (id, v) VALUES (4, 4)")
            rt = runtime("t")  # a run that starts after the rename: the log tells what became of the table
            try:
                with pytest.raises(CdcError) as stop:
                    sync(rt, until_caught_up=True)
            finally:
                rt.close()
            assert f"{ns}.t " in str(stop.value), stop.value
            if added_first:
                assert f"a later DDL renamed or dropped {ns}.t: if renamed, put its new name in source.tables" in \
                    stop.value.hint, stop.value
            else:
                assert f"{ns}.t_new in source.tables in place of {ns}.t" in stop.value.hint, stop.value
            rt = runtime("t_new")  # the way out the stop names
            try:
                snapshot_all(rt)
                sync(rt, until_caught_up=True)
                execute(src, f"DELETE FROM {ns}.t_new WHERE id = 1", f"INSERT INTO {ns}.t_new (id, v) VALUES (5, 5)")
                sync(rt, until_caught_up=True)
            finally:
                rt.close()
            want = [(2, 20), (3, 3), (4, 4), (5, 5)]
            if added_first:
                want = [(2, 20, 7), (3, 3, 30), (4, 4, 7), (5, 5, 7)]
            assert fetch_rows(tgt, f'"{ns}".t_new', "id") == fetch_rows(src, f"{ns}.t_new", "id") == want
        finally:
            if source == "postgres":
                drop_slot(src, slot_name(unique_name))
    tgt.close()
