"""What the target server offers: transactions need a replica set or a sharded cluster (mongos)."""
from __future__ import annotations

from dataclasses import dataclass

from pymongo import MongoClient
from pymongo.client_session import ClientSession

from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import CdcError

META_DATABASE = "cdc_assets_meta"


def connect(url: DbUrl) -> MongoClient:
    """pymongo reads the URL itself (seed lists, SRV, options); tz-aware so dates come back as UTC instants."""
    return MongoClient(url.render(masked=False), tz_aware=True)


def collection(client: MongoClient, table: TableId):
    """A table's collection: `namespace.name` -> database.collection."""
    return client[table.namespace][table.name]


@dataclass
class MongoTx:
    """What the engine carries through a commit: the session whose transaction holds every write (None on a
    standalone server, where each write stands alone)."""

    client: MongoClient
    session: ClientSession | None


def has_transactions(client: MongoClient) -> bool:
    return transactions_in(client.admin.command("hello"))


def transactions_in(hello: dict) -> bool:
    """From the `hello` reply: a replica set member names its set; mongos says "isdbgrid"."""
    return bool(hello.get("setName")) or hello.get("msg") == "isdbgrid"


class NoTransactions(CdcError):
    """A standalone MongoDB server: nothing can commit a batch and its position together. Way out: a replica set
    (`mongod --replSet rs0`, then `rs.initiate()`), or positions outside the target without exactly-once
    (docs/connectors/mongodb-target.md)."""


def require_transactions(client: MongoClient, url: DbUrl, what: str) -> None:
    if not has_transactions(client):
        raise standalone_refusal(url, what)


def standalone_refusal(url: DbUrl, what: str) -> NoTransactions:
    return NoTransactions(
            f"{what} needs multi-document transactions, and the MongoDB target {url} is a standalone server "
            "(transactions need a replica set or a sharded cluster)",
            "run it as a replica set (one member will do: mongod --replSet rs0, then rs.initiate()), or keep "
            "positions outside the target (resumer.resume_type: sqlite or from_db) without pipeline.exactly_once")
