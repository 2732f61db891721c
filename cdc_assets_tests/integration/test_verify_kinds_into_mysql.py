"""Verification into a MySQL target of a table holding every column kind the adversary draws (kinds.py), edge
values included: rows from the snapshot and rows and updates through the log with a sync running, all equal
under the documented type mapping, must pass; one corrupted target value must fail its split.

On a failure the assertion names each column whose canonical texts differ between the two sides' reads, so a
false alarm points at its kind."""
import random
import threading
import time

import pytest

from cdc_assets.config import load_config
from cdc_assets.core.row_digest import canonical
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import carried_now
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.verify import FAILED, PASSED, verify_table
from cdc_assets_tests.adversary.kinds import KINDS, MYSQL
from cdc_assets_tests.adversary.schema import Table, q
from cdc_assets_tests.support import snapshot_all, source_database, write_config

ROWS = 12  # per phase: more than any kind's edge values, so each edge lands in the snapshot and in the log
CORRUPT = 5


def kinds_table(source: str) -> Table:
    kinds = [k for k in KINDS if source in k.ddl]
    return Table("kinds", "composite", "utf8mb4_bin" if source == MYSQL else "",
                 tuple((f"c_{k.name}", k.name) for k in kinds), 0)


def values(table: Table, source: str, row: int, rng: random.Random) -> list[str]:
    """Row `row`'s literals: the kind's `row`-th edge value a MySQL target takes (none that documentedly stops),
    then ordinary ones; the last row of a phase all NULL."""
    out = []
    for _, kind in table.kinds():
        edges = [e for e in kind.edges.get(source, ()) if e not in kind.not_into.get(MYSQL, ())
                 and e not in kind.stops_on]
        out.append("NULL" if row == ROWS - 1 else edges[row] if row < len(edges) else ordinary(kind, source, rng))
    return out


def ordinary(kind, source: str, rng: random.Random) -> str:
    value = kind.ordinary(rng, source)
    return value if value not in kind.stops_on else ordinary(kind, source, rng)


def insert(table: Table, source: str, name: str, ident: int, literals: list[str]) -> str:
    columns = [*table.key_columns, *(c for c, _ in table.columns)]
    return (f"INSERT INTO {name} ({', '.join(q(source, c) for c in columns)}) "
            f"VALUES ({', '.join([*table.key_values(source, ident), *literals])})")


def update(table: Table, source: str, name: str, ident: int, literals: list[str]) -> str:
    sets = ", ".join(f"{q(source, c)} = {v}" for (c, _), v in zip(table.columns, literals))
    return f"UPDATE {name} SET {sets} WHERE {table.where(source, ident)}"


def differing_columns(rt: TaskRuntime, table_id) -> str:
    """Each column whose canonical texts differ anywhere in the table: how often, and the first (source's,
    target's) pair."""
    schema = carried_now(rt, table_id)
    plan = rt.plans.load(table_id)
    key_at = [schema.columns.index(c) for c in schema.columns if c.name in schema.primary_key]
    found: dict[str, list[tuple[str, str]]] = {}
    for split in plan.splits:
        read = rt.source.read_split(schema, split.range, plan.key_kind, rt.sink.target_format())
        target = rt.sink.range_rows(schema, split.range, plan.key_kind, rt.config.source.db_type,
                                    [tuple(r[i] for i in key_at) for r in read.rows])
        by_key = {tuple(canonical(r[i], schema.columns[i].kind) for i in key_at): r for r in target}
        for row in read.rows:
            other = by_key.get(tuple(canonical(row[i], schema.columns[i].kind) for i in key_at))
            for i, column in enumerate(schema.columns):
                mine = canonical(row[i], column.kind)
                theirs = canonical(other[i], column.kind) if other else "<no row>"
                if mine != theirs:
                    found.setdefault(column.name, []).append((mine[:60], theirs[:60]))
    return "; ".join(f"{name} x{len(pairs)}: {pairs[0]}" for name, pairs in found.items())


@pytest.fixture(params=["mysql", "postgres"])
def task(request, tmp_path, servers, mariadb_target, unique_name, spark):
    """A snapshotted task of the kinds table into MySQL, then rows and updates through the log with a sync
    running; yields (runtime, table, target connection, namespace)."""
    source = request.param
    table = kinds_table(source)
    rng = random.Random(11)
    name = f"{q(source, unique_name)}.{q(source, table.name)}"
    setup = ([f"CREATE SCHEMA {unique_name}"] if source != MYSQL else []) + table.session(source)
    first = [insert(table, source, name, i + 1, values(table, source, i, rng)) for i in range(ROWS)]
    target_server = mariadb_target if source == MYSQL else servers.mariadb
    with source_database(servers, source, unique_name, setup + table.ddl(source, unique_name) + first) as conn:
        path = write_config(tmp_path, servers, task_id=f"vk_{unique_name}", source=source, source_db=unique_name,
                            tables=[f"{unique_name}.{table.name}"], target="mysql",
                            target_server=mariadb_target if source == MYSQL else None, snapshot={"split_size": 8},
                            pipeline={"checkpoint_interval_secs": 0.3, "checkpoint_after_events": 20})
        config = load_config(path)
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        target = target_server.connect()
        stop = threading.Event()
        syncer = TaskRuntime(config)
        thread = threading.Thread(target=sync, args=(syncer,), kwargs={"stop": stop}, daemon=True)
        try:
            snapshot_all(rt)
            thread.start()
            with conn.cursor() as cur:
                for i in range(ROWS):  # new rows, then every snapshotted row takes another row's values
                    cur.execute(insert(table, source, name, ROWS + i + 1, values(table, source, i, rng)))
                for i in range(ROWS):
                    cur.execute(update(table, source, name, i + 1, values(table, source, (i + 5) % ROWS, rng)))
            deadline = time.monotonic() + 60
            while rt.resumer.checkpoint() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            yield rt, config.source.table_ids[0], target, unique_name
        finally:
            stop.set()
            thread.join(60)
            syncer.close()
            rt.close()
            with target.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{unique_name}`")
            target.close()


def test_every_kind_verifies_equal_and_a_corrupted_value_fails_its_split(task):
    rt, table_id, target, ns = task
    checks = verify_table(rt, table_id, wait_secs=60)
    assert [c.status for c in checks] == [PASSED] * len(checks), differing_columns(rt, table_id)
    assert sum(c.source_rows for c in checks) == 2 * ROWS

    with target.cursor() as cur:
        cur.execute(f"UPDATE `{ns}`.`kinds` SET `c_bigint` = 424242 WHERE `kb` = 'k{CORRUPT}'")
        assert cur.rowcount == 1
    checks = verify_table(rt, table_id, wait_secs=60)
    failed = [c for c in checks if c.status == FAILED]
    assert len(failed) == 1 and [c.status for c in checks].count(PASSED) == len(checks) - 1, [c.line() for c in checks]
    assert f'different 1 ({CORRUPT % 7}, "k{CORRUPT}")' in failed[0].detail, failed[0].line()
