"""No log value is cut or rounded on its way into the target: a value the target column cannot hold as it is
stops the batch naming table, column, key and position; a column the user widened on both sides holds every
value whole, in this run and the later ones."""
from decimal import Decimal

import pytest

from cdc_assets.engine.incremental import sync
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.schema_changes import SchemaChangeHalted
from cdc_assets.errors import ValueMisfit
from cdc_assets_tests.support import config_for, execute, fetch_rows, postgres_target, source_database

LONG, LONGER = "x" * 50, "y" * 60


@pytest.fixture
def task(servers, unique_name, tmp_path):
    """(make_runtime(**pipeline), source, target, target table SQL) for `t (id, v VARCHAR(10), n INT)`, MySQL ->
    PostgreSQL, from the log's end."""
    target = f"{unique_name}_tgt"
    tgt = postgres_target(servers, target)
    with source_database(servers, "mysql", unique_name,
                         ["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), n INT)"]) as src:
        runtimes = []

        def make(**pipeline) -> TaskRuntime:
            config = config_for(tmp_path, servers, task_id=unique_name, source="mysql", source_db=unique_name,
                                tables=[f"{unique_name}.t"], target="postgres", target_db=target,
                                pipeline={"startup_mode": "latest", **pipeline})
            rt = TaskRuntime(config)
            if not runtimes:
                rt.sink.ensure_table(rt.source.describe(config.source.table_ids[0]))
            runtimes.append(rt)
            return rt
        try:
            yield make, src, tgt, f'"{unique_name}".t'
        finally:
            for rt in runtimes:
                rt.close()
            tgt.close()


def test_the_halt_advice_followed_to_the_letter_keeps_every_value_whole(task):
    make, src, tgt, table = task
    sync(make(), until_caught_up=True)
    execute(src, "INSERT INTO t VALUES (1, 'short', 7)",
            "ALTER TABLE t MODIFY v VARCHAR(100), MODIFY n DECIMAL(10,2)", f"INSERT INTO t VALUES (2, '{LONG}', 12.34)")
    with pytest.raises(SchemaChangeHalted):
        sync(make(), until_caught_up=True)

    execute(tgt, f"ALTER TABLE {table} ALTER COLUMN v TYPE varchar(100), ALTER COLUMN n TYPE numeric(10,2)")
    sync(make(schema_change_policy="ignore"), until_caught_up=True)
    execute(src, f"INSERT INTO t VALUES (3, '{LONGER}', 56.78)", "UPDATE t SET n = 0.5 WHERE id = 1")
    sync(make(), until_caught_up=True)  # back to halt: later runs keep every value whole too

    assert fetch_rows(tgt, table, "id") == fetch_rows(src, "t", "id") == [
        (1, "short", Decimal("0.50")), (2, LONG, Decimal("12.34")), (3, LONGER, Decimal("56.78"))]


@pytest.mark.parametrize("rows", [1, 300], ids=["values", "copy"])  # 300 fresh rows: the COPY paths
def test_a_value_a_narrowed_target_column_cannot_hold_stops_the_batch_naming_it(task, rows):
    make, src, tgt, table = task
    sync(make(), until_caught_up=True)
    execute(tgt, f"ALTER TABLE {table} ALTER COLUMN v TYPE varchar(5), ALTER COLUMN n TYPE numeric(4,0)")
    execute(src, "INSERT INTO t VALUES " + ", ".join(f"({i}, 'abc', {i})" for i in range(1, rows + 1)))
    sync(make(), until_caught_up=True)
    checkpoint = make().resumer.checkpoint().position
    execute(src, "INSERT INTO t VALUES " + ", ".join(f"({i}, 'abcdefg', 1)" for i in range(1000, 1000 + rows)))

    with pytest.raises(ValueMisfit, match=rf"row \(1000,\) of \S+\.t at mysql-bin\.\d+:\d+ .*: column 'v' holds "
                                          r"'abcdefg', which the "
                                          r"target's column \(character varying\(5\)\) .* TYPE varchar\(10\)") as err:
        sync(make(), until_caught_up=True)
    assert f" at {checkpoint}:" not in str(err.value)  # the change's own position, past the checkpoint
    assert len(fetch_rows(tgt, table, "id")) == rows


def test_a_mysql_target_that_would_round_stops_the_batch_too(servers, unique_name, tmp_path):
    """MySQL rounds a DECIMAL's extra digits and a DATETIME's extra fraction even in strict mode (a note, no
    error): the engine looks at the values first."""
    ns = unique_name
    seed = [f"CREATE SCHEMA {ns}", f"CREATE TABLE {ns}.t (id INT PRIMARY KEY, n NUMERIC(10,2), d TIMESTAMP(3))"]
    with source_database(servers, "postgres", unique_name, seed) as src:
        config = config_for(tmp_path, servers, task_id=unique_name, source="postgres", source_db=unique_name,
                            tables=[f"{ns}.t"], target="mysql", target_db=ns, pipeline={"startup_mode": "latest"})
        runtimes = [TaskRuntime(config)]
        tgt = servers.mariadb.connect(None)

        def run() -> None:
            runtimes.append(TaskRuntime(config))
            sync(runtimes[-1], until_caught_up=True)
        try:
            runtimes[0].sink.ensure_table(runtimes[0].source.describe(config.source.table_ids[0]))
            run()
            execute(tgt, f"ALTER TABLE `{ns}`.t MODIFY n DECIMAL(10,1), MODIFY d DATETIME(1)")
            execute(src, f"INSERT INTO {ns}.t VALUES (1, 12.30, '2024-01-01 00:00:00.500')")
            run()  # 12.30 and .500 fit DECIMAL(10,1) and DATETIME(1) as they are
            execute(src, f"INSERT INTO {ns}.t VALUES (2, 12.3, '2024-01-01 00:00:00.25')")
            with pytest.raises(ValueMisfit, match=r"row \(2,\) .*column 'd' holds .*, which the target's column "
                                                  r"\(datetime\(1\)\).* MODIFY `d` datetime\(3\)"):
                run()
            execute(tgt, f"ALTER TABLE `{ns}`.t MODIFY d DATETIME(3)")
            execute(src, f"INSERT INTO {ns}.t VALUES (3, 12.34, '2024-01-01 00:00:00')")
            with pytest.raises(ValueMisfit, match=r"row \(3,\) .*column 'n' holds Decimal\('12.34'\), which the "
                                                  r"target's column \(decimal\(10,1\)\).* MODIFY `n` decimal\(10,2\)"):
                run()
            # Row 2 fits once d is DATETIME(3): it is committed when it came in a batch before row 3's (as on a
            # loaded machine), and stopped with row 3 when both came in one batch; row 3 never lands rounded.
            rows = [r[:2] for r in fetch_rows(tgt, f"`{ns}`.t", "id")]
            assert rows in ([(1, Decimal("12.3"))], [(1, Decimal("12.3")), (2, Decimal("12.3"))]), rows
        finally:
            for rt in runtimes:
                rt.close()
            execute(tgt, f"DROP DATABASE IF EXISTS `{ns}`")
            tgt.close()
