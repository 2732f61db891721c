"""MongoDB as a target on a real replica set (CDC_TEST_MONGO_URL; skipped without one, the reason in pytest's
summary): a MariaDB or PostgreSQL snapshot through the CLI compared document by document with exact decimals,
binary and dates; the log phase (insert, update, partial update, delete, key change); positions `from_target` in
`task_position`; and a SIGKILL in the middle of a batch, after which no batch is applied twice and the documents
equal the source rows."""
import datetime as dt
import json
import os
import secrets
import signal
import subprocess
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from bson.binary import Binary
from bson.decimal128 import Decimal128
from pymongo import MongoClient

from cdc_assets.config import load_config
from cdc_assets.core.tables import Kind, TableId
from cdc_assets.engine.faults import ENV as CRASH_ENV
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.sinks.mongodb.documents import to_document
from cdc_assets_tests.support import MONGO_URL, cli_command, endpoint, mongo, run_transactions, source_database

pytestmark = mongo
ROWS = 1_000
UTC = dt.timezone.utc
BIG = secrets.token_hex(3000)  # 6 kB, incompressible: stored out of line (TOAST) by PostgreSQL

MYSQL_SEED = [
    "CREATE TABLE kinds (id BIGINT PRIMARY KEY, amount DECIMAL(65,30), big BIGINT UNSIGNED, raw VARBINARY(16), "
    "day DATE, at DATETIME(3), dur TIME, flags BIT(4), doc JSON, note TEXT, v INT NOT NULL DEFAULT 0)",
    "INSERT INTO kinds VALUES (1, 12345.678900000000000000000000000000, 18446744073709551615, x'00ff10', "
    "'2024-02-29', '2024-02-29 23:59:59.123', '-838:59:59', b'0101', '{\"n\": 9007199254740993}', 'é', 0)",
    f"INSERT INTO kinds (id, amount, note) SELECT seq, seq / 7, CONCAT('row ', seq) FROM seq_2_to_{ROWS}",
    f"UPDATE kinds SET note = '{BIG}' WHERE id IN (2, 5)",
]
POSTGRES_SEED = [
    "CREATE SCHEMA {ns}",
    "CREATE TABLE {ns}.kinds (id BIGINT PRIMARY KEY, amount NUMERIC(40,10), raw BYTEA, day DATE, at TIMESTAMP(3), "
    "ts TIMESTAMPTZ(3), u UUID, doc JSONB, tags INT[], note TEXT, v INT NOT NULL DEFAULT 0)",
    "INSERT INTO {ns}.kinds VALUES (1, 12345678901234567890.0123456789, '\\x00ff10', '2024-02-29', "
    "'2024-02-29 23:59:59.123', '2024-02-29 23:59:59.123+05:30', 'ab1154ac-acd8-49a4-8c61-756d70d3b21f', "
    "'{{\"x\": 0.10000000000000000000001}}', '{{1,2,NULL}}', 'é', 0)",
    f"INSERT INTO {{ns}}.kinds (id, amount, note) SELECT g, g / 7.0, 'row ' || g FROM generate_series(2, {ROWS}) g",
    "ALTER TABLE {ns}.kinds ALTER COLUMN note SET STORAGE EXTERNAL",
    f"UPDATE {{ns}}.kinds SET note = '{BIG}' WHERE id IN (2, 5)",  # an update of v alone logs note as unchanged
]
FIRST_ROW = {
    "mysql": {"_id": 1, "amount": Decimal128("12345." + "6789" + "0" * 25),
              "big": Decimal128("18446744073709551615"), "raw": b"\x00\xff\x10",
              "day": dt.datetime(2024, 2, 29, tzinfo=UTC), "at": dt.datetime(2024, 2, 29, 23, 59, 59, 123000, tzinfo=UTC),
              "dur": "-838:59:59", "flags": "0101", "doc": {"n": 9007199254740993}, "note": "é", "v": 0},
    "postgres": {"_id": 1, "amount": Decimal128("12345678901234567890.0123456789"), "raw": b"\x00\xff\x10",
                 "day": dt.datetime(2024, 2, 29, tzinfo=UTC),
                 "at": dt.datetime(2024, 2, 29, 23, 59, 59, 123000, tzinfo=UTC),
                 "ts": dt.datetime(2024, 2, 29, 18, 29, 59, 123000, tzinfo=UTC),
                 "u": Binary.from_uuid(uuid.UUID("ab1154ac-acd8-49a4-8c61-756d70d3b21f")),
                 "doc": {"x": Decimal128("0.10000000000000000000001")}, "tags": [1, 2, None], "note": "é", "v": 0},
}


@pytest.fixture
def client():
    c = MongoClient(MONGO_URL, tz_aware=True)
    yield c
    c.close()


@pytest.fixture(params=["mysql", "postgres"])
def source(request, servers, unique_name, client):
    kind = request.param
    seed = MYSQL_SEED if kind == "mysql" else [s.format(ns=unique_name) for s in POSTGRES_SEED]
    with source_database(servers, kind, unique_name, seed) as conn:
        yield kind, unique_name, conn
    client.drop_database(unique_name)


def config_path(tmp_path: Path, servers, source, resumer: dict, **sections) -> Path:
    kind, ns, _ = source
    raw = {"task_id": f"mongo_{ns}"[:40], "source": {**endpoint(servers, kind, ns), "tables": [f"{ns}.kinds"]},
           "target": {"db_type": "mongo", "url": MONGO_URL}, "resumer": resumer,
           "runtime": {"data_dir": str(tmp_path / "state")}, "spark": {"master": "local[2]"},
           "snapshot": {"split_size": 200}, **sections}
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def cli(path: Path, *args: str, crash: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), **({CRASH_ENV: crash} if crash else {})}
    return subprocess.run(cli_command(path, *args), env=env, capture_output=True, text=True, timeout=900)


def ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


def source_documents(path: Path, ns: str) -> dict:
    """Every source row as the document it must be, read by the source's own connection (UTC session)."""
    rt = TaskRuntime(load_config(path))
    try:
        schema = rt.source.describe(TableId(ns, "kinds"))
        names = [c.name for c in schema.columns]
        quoted = f"`{ns}`.`kinds`" if rt.source.dialect == "mysql" else f'"{ns}"."kinds"'
        with rt.source.conn.cursor() as cur:
            cur.execute(f"SELECT {', '.join(_select(c, rt.source.dialect, rt.source.quote(c.name)) for c in schema.columns)} "
                        f"FROM {quoted}")
            return {row[0]: to_document(dict(zip(names, row)), schema) for row in cur.fetchall()}
    finally:
        rt.close()


def _select(column, dialect: str, quoted: str) -> str:
    """The forms the log gives these kinds: JSON as its text (psycopg2 would parse jsonb fractions into doubles),
    BIT as its 0/1 digits (PyMySQL gives bytes)."""
    if column.kind is Kind.JSON and dialect == "postgres":
        return f"{quoted}::text"
    if column.kind is Kind.BIT and dialect == "mysql":
        return f"LPAD(BIN({quoted}), {column.length}, '0')"
    return quoted


def target_documents(client, ns: str) -> dict:
    return {d["_id"]: d for d in client[ns]["kinds"].find({})}


def assert_same(client, path: Path, ns: str) -> None:
    want, got = source_documents(path, ns), target_documents(client, ns)
    assert got.keys() == want.keys(), f"missing {sorted(want.keys() - got.keys())[:5]}, extra {sorted(got.keys() - want.keys())[:5]}"
    differing = [k for k in want if got[k] != _tz(want[k])]
    assert not differing, f"{len(differing)} documents differ, e.g. {differing[0]}: {got[differing[0]]} != {want[differing[0]]}"


def _tz(document: dict) -> dict:
    """What the server gives back for dates: UTC instants."""
    return {k: v.replace(tzinfo=UTC) if isinstance(v, dt.datetime) and v.tzinfo is None else v
            for k, v in document.items()}


def run(conn, statements: list[str]) -> None:
    run_transactions(conn, statements)


def changes(kind: str, ns: str) -> list[str]:
    t = f"`{ns}`.kinds" if kind == "mysql" else f"{ns}.kinds"
    return [f"INSERT INTO {t} (id, amount, note) VALUES ({ROWS + 1}, 1.5, 'new')",
            f"UPDATE {t} SET note = 'changed', v = v + 1 WHERE id BETWEEN 10 AND 60",
            f"UPDATE {t} SET v = v + 1 WHERE id = 2",  # PostgreSQL logs a partial row: note (TOASTed) left out
            f"DELETE FROM {t} WHERE id BETWEEN 100 AND 110",
            f"UPDATE {t} SET id = {ROWS + 50}, v = v + 1 WHERE id = 3",  # a key change
            f"UPDATE {t} SET id = {ROWS + 60}, v = v + 1 WHERE id = 5",  # a key change without note: a move there
            f"UPDATE {t} SET amount = amount + 1 WHERE id = {ROWS + 1}; DELETE FROM {t} WHERE id = 4"]


def test_snapshot_then_log_into_mongo_document_by_document(tmp_path, servers, source, client):
    kind, ns, conn = source
    path = config_path(tmp_path, servers, source, {"resume_type": "from_target"})
    ok(cli(path, "snapshot"))
    got = target_documents(client, ns)
    assert len(got) == ROWS and got[1] == FIRST_ROW[kind]
    assert isinstance(got[2]["amount"], Decimal128)
    assert_same(client, path, ns)

    run(conn, changes(kind, ns))
    ok(cli(path, "sync", "--until-caught-up"))
    assert_same(client, path, ns)
    got = target_documents(client, ns)
    assert ROWS + 50 in got and 3 not in got and 100 not in got and got[ROWS + 1]["amount"].to_decimal() == Decimal("2.5")
    assert got[2]["note"] == BIG and got[2]["v"] == 1  # the partial row kept the column the log left out
    assert 5 not in got and got[ROWS + 60]["note"] == BIG and got[ROWS + 60]["v"] == 1  # the moved document

    positions = client["cdc_assets_meta"]["task_position"]
    task = load_config(path).task_id
    finished = list(positions.find({"task_id": task, "resumer_type": "SnapshotFinished"}))
    assert all(json.loads(d["position_data"])["type"] == "RdbSnapshotFinished" for d in finished)
    assert sum(json.loads(d["position_data"])["rows"] for d in finished) == ROWS  # committed with the documents
    checkpoint = positions.find_one({"task_id": task, "resumer_type": "CdcDoing", "position_key": "checkpoint"})
    assert checkpoint is not None and json.loads(checkpoint["position_data"])["events"] == 1 + 51 + 1 + 11 + 1 + 1 + 2
    assert any(i["unique"] for i in positions.list_indexes() if i["name"] == "task_position_key")
    assert not list(client[ns].list_collection_names(filter={"name": {"$regex": "^_cdc_stage_"}}))


@pytest.mark.crash
def test_sigkill_mid_batch_then_rerun_applies_no_batch_twice(tmp_path, servers, source, client):
    kind, ns, conn = source
    path = config_path(tmp_path, servers, source, {"resume_type": "from_target"},
                       pipeline={"checkpoint_after_events": 5})
    ok(cli(path, "snapshot"))
    t = f"`{ns}`.kinds" if kind == "mysql" else f"{ns}.kinds"
    run(conn, [f"UPDATE {t} SET v = v + 1 WHERE id BETWEEN {i} AND {i + 4}" for i in range(10, 200, 5)])
    # the third batch written inside its transaction, not committed
    killed = cli(path, "sync", "--until-caught-up", crash="incremental.after_apply:3")
    assert killed.returncode == -signal.SIGKILL, (killed.stdout + killed.stderr)[-3000:]
    task = load_config(path).task_id
    positions = client["cdc_assets_meta"]["task_position"]
    before = json.loads(positions.find_one({"task_id": task, "resumer_type": "CdcDoing"})["position_data"])["events"]
    # the batches committed with their checkpoints before the kill (idle checkpoints pass the crash point too)
    assert before % 5 == 0 and before < 38 * 5
    ok(cli(path, "sync", "--until-caught-up"))
    after = json.loads(positions.find_one({"task_id": task, "resumer_type": "CdcDoing"})["position_data"])["events"]
    assert after == 38 * 5  # every change counted once: no batch committed twice
    assert_same(client, path, ns)
    assert all(d["v"] == 1 for d in client[ns]["kinds"].find({"_id": {"$gte": 10, "$lt": 200}}))


def test_an_existing_collection_with_other_ids_is_refused(tmp_path, servers, source, client):
    kind, ns, _ = source
    client[ns]["kinds"].insert_one({"_id": {"id": 1}, "note": "someone else's"})
    path = config_path(tmp_path, servers, source, {"resume_type": "sqlite"})
    result = cli(path, "snapshot")
    assert result.returncode != 0
    assert f"collection {ns}.kinds" in result.stderr + result.stdout and "is not the form" in result.stderr + result.stdout
