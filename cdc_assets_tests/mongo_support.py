"""MongoDB -> PostgreSQL tasks for the end-to-end and crash tests: a config of declared collections, seed documents
of every declared kind, and the target's rows compared with the source's documents row by row."""
from __future__ import annotations

import datetime as dt
import json
import random
from decimal import Decimal
from pathlib import Path

import yaml
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from pymongo import MongoClient, WriteConcern

from cdc_assets.core.tables import Kind, TableId
from cdc_assets.sources.mongodb.collections import parse_collection
from cdc_assets.sources.mongodb.values import to_row
from cdc_assets_tests.support import MONGO_URL, fetch_rows

FIELDS = {"_id": "int", "name": "string", "n": "int", "price": "decimal(30,6)", "ratio": "float64",
          "placed": "timestamp", "ok": "bool", "tags": "json"}
COLLECTIONS = {"orders": {"fields": FIELDS}, "events": {"id_kind": "int"}}


def config(tmp_path: Path, servers, database: str, target_db: str, **sections) -> Path:
    raw = {"task_id": database, "runtime": {"data_dir": str(tmp_path / "state")}, "spark": {"master": "local[2]"},
           "source": {"db_type": "mongo", "url": MONGO_URL,
                      "collections": {f"{database}.{name}": spec for name, spec in COLLECTIONS.items()}},
           "target": {"db_type": "postgres", "url": servers.postgres.url(target_db)},
           "snapshot": {"split_size": 250}, **sections}
    path = tmp_path / f"{database}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def document(i: int, rng: random.Random) -> dict:
    return {"_id": i, "name": f"n{i}\t\\ é{rng.randint(0, 9)}", "n": Int64(rng.randint(-2**62, 2**62)),
            "price": Decimal128(f"{rng.randint(0, 10**12)}.{rng.randint(0, 999999):06d}"), "ratio": rng.random(),
            "placed": dt.datetime(2024, 1, 1) + dt.timedelta(milliseconds=rng.randint(0, 10**10)),
            "ok": rng.random() < 0.5, "tags": {"k": [i, str(i)], "d": Decimal128("1.10")}}


def client() -> MongoClient:
    return MongoClient(MONGO_URL, uuidRepresentation="standard")


def collection(mongo: MongoClient, database: str, name: str):
    return mongo[database].get_collection(name, write_concern=WriteConcern("majority"))


def expected(mongo: MongoClient, database: str, name: str) -> list[tuple]:
    spec = parse_collection(f"{database}.{name}", COLLECTIONS[name])
    rows = [to_row(d, spec) for d in collection(mongo, database, name).find().sort("_id", 1)]
    return [tuple(_comparable(row[c.name], c.kind) for c in spec.schema().columns) for row in rows]


def actual(conn, database: str, name: str) -> list[tuple]:
    spec = parse_collection(f"{database}.{name}", COLLECTIONS[name])
    return [tuple(_comparable(v, c.kind) for v, c in zip(row, spec.schema().columns))
            for row in fetch_rows(conn, f'"{TableId(database, name).namespace}"."{name}"', '"_id"')]


def _comparable(value, kind: Kind):
    if kind is Kind.JSON and isinstance(value, str):
        return json.dumps(json.loads(value), sort_keys=True)  # the source's text, as fetch_rows renders jsonb
    if isinstance(value, Decimal):
        return value.normalize()
    return value
