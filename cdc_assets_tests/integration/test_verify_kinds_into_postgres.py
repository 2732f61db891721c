"""Verification of every adversary kind into PostgreSQL, on real servers: a table holding each kind's edge values
and ordinary ones (those the type mapping lets reach a PostgreSQL target, none whose documented outcome is a stop)
is snapshotted, written through the log while a sync runs, then verified. Equal values must pass in every split;
one corrupted target value must fail its split, so the comparison neither cries wolf nor sees nothing."""
import random
import threading
import time

import pytest

from cdc_assets.core.row_digest import canonical
from cdc_assets.engine.incremental import sync
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.verify import FAILED, PASSED, verify_table
from cdc_assets_tests.adversary.kinds import KINDS, POSTGRES
from cdc_assets_tests.adversary.schema import Table, q
from cdc_assets_tests.support import config_for, snapshot_all, source_database

SNAPSHOT_ROWS, LOG_ROWS = 30, 30
CORRUPT = 7  # a row id whose target JSON value is replaced


def kinds_table(engine: str) -> Table:
    columns = tuple((f"c_{k.name}", k.name) for k in KINDS if engine in k.ddl)
    return Table("kinds", "composite", "utf8mb4_general_ci" if engine != POSTGRES else "", columns, 0)


def value(kind, engine: str, ident: int, rng: random.Random) -> str:
    """Edge values first, in turn; an ordinary one every third row; NULL every eleventh."""
    edges = [e for e in kind.edges.get(engine, ()) if e not in kind.not_into.get(POSTGRES, ())
             and e not in kind.stops_on]
    if ident % 11 == 0:
        return "NULL"
    if edges and ident % 3:
        return edges[ident % len(edges)]
    while True:
        drawn = kind.ordinary(rng, engine)
        if drawn not in kind.stops_on:
            return drawn


def insert(table: Table, engine: str, ns: str, ident: int, rng: random.Random) -> str:
    columns = [*table.key_columns, *(c for c, _ in table.columns)]
    values = [*table.key_values(engine, ident), *(value(k, engine, ident, rng) for _, k in table.kinds())]
    return (f"INSERT INTO {q(engine, ns)}.{q(engine, table.name)} ({', '.join(q(engine, c) for c in columns)}) "
            f"VALUES ({', '.join(values)})")


def update(table: Table, engine: str, ns: str, ident: int, rng: random.Random) -> str:
    """Row `ident` given the values row `ident + 1` would have."""
    sets = ", ".join(f"{q(engine, c)} = {value(k, engine, ident + 1, rng)}" for c, k in table.kinds())
    return f"UPDATE {q(engine, ns)}.{q(engine, table.name)} SET {sets} WHERE {table.where(engine, ident)}"


def differing_columns(rt: TaskRuntime) -> dict[str, list[str]]:
    """Per column, the values whose canonical texts differ on both sides (or that `canonical` cannot take)."""
    found: dict[str, list[str]] = {}
    for tp in ensure_plans(rt):
        schema = rt.source.describe(tp.plan.table)
        key_at = [i for k in schema.primary_key for i, c in enumerate(schema.columns) if c.name == k]
        for split in tp.plan.splits:
            read = rt.source.read_split(schema, split.range, tp.plan.key_kind, rt.sink.target_format())
            keys = [tuple(r[i] for i in key_at) for r in read.rows]
            target = {tuple(r[i] for i in key_at): r for r in rt.sink.range_rows(
                schema, split.range, tp.plan.key_kind, rt.config.source.db_type, keys)}
            for key, row in zip(keys, read.rows):
                other = target.get(key, (None,) * len(row))
                for column, a, b in zip(schema.columns, row, other):
                    try:
                        same = canonical(a, column.kind) == canonical(b, column.kind)
                    except Exception as exc:  # noqa: BLE001 - named in the report
                        same = f"{type(exc).__name__}"
                    if same is not True:
                        found.setdefault(column.name, []).append(f"{a!r} / {b!r} {same or ''}")
    return found


def run(conn, statements: list[str]) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


@pytest.mark.parametrize("engine", ["mysql", "postgres"])
def test_every_kind_verifies_equal_and_a_corrupted_value_fails(engine, tmp_path, servers, unique_name, pg_target,
                                                              spark):
    table, rng = kinds_table(engine), random.Random(5)
    ns = unique_name
    schema_sql = ([f"CREATE SCHEMA {ns}"] if engine == POSTGRES else []) + table.ddl(engine, ns)
    with source_database(servers, engine, ns, schema_sql) as src:
        run(src, table.session(engine))
        run(src, [insert(table, engine, ns, i, rng) for i in range(1, SNAPSHOT_ROWS + 1)])
        config = config_for(tmp_path, servers, task_id=f"vk_{ns}", source=engine, source_db=ns,
                            tables=[f"{ns}.{table.name}"], target="postgres", target_db=pg_target[0],
                            snapshot={"split_size": 20},
                            pipeline={"checkpoint_interval_secs": 0.3, "checkpoint_after_events": 20})
        rt = TaskRuntime(config)
        rt.adopt_spark(spark)
        snapshot_all(rt)
        stop = threading.Event()
        syncer = TaskRuntime(config)
        thread = threading.Thread(target=sync, args=(syncer,), kwargs={"stop": stop}, daemon=True)
        thread.start()
        try:
            run(src, [insert(table, engine, ns, i, rng) for i in range(SNAPSHOT_ROWS + 1, SNAPSHOT_ROWS + LOG_ROWS)])
            run(src, [update(table, engine, ns, i, rng) for i in range(3, SNAPSHOT_ROWS + LOG_ROWS, 5)])
            deadline = time.monotonic() + 60  # verification does not wait for a sync to start
            while rt.resumer.checkpoint() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            checks = verify_table(rt, config.source.table_ids[0], wait_secs=60)
            assert [c.status for c in checks] == [PASSED] * len(checks), ([c.line() for c in checks],
                                                                          differing_columns(rt))

            with pg_target[1].cursor() as cur:
                cur.execute(f'UPDATE "{ns}".kinds SET c_json = \'{{"corrupted": true}}\' WHERE '
                            f"{table.where(POSTGRES, CORRUPT)}")
                assert cur.rowcount == 1
            time.sleep(1)
            checks = verify_table(rt, config.source.table_ids[0], wait_secs=60)
            assert sorted(c.status for c in checks) == [FAILED] + [PASSED] * (len(checks) - 1), \
                [c.line() for c in checks]
            [failed] = [c for c in checks if c.status == FAILED]
            assert "different 1 (" in failed.detail, failed.detail
        finally:
            stop.set()
            thread.join(60)
            syncer.close()
            rt.close()
