"""MongoDB as a snapshot source: capture check, collections described as tables, split plans on `_id`, and the
export of a group of splits as Spark tasks that read with pymongo.

Each captured collection is declared in `source.collections` (collections.py): a collection `db.coll` is the
table `db.coll` of the task (namespace = database), keyed by `_id`.
"""
from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping

from pymongo import MongoClient

from cdc_assets.core.added_fill import AddedFill
from cdc_assets.core.boundary import RowExport, TargetFormat
from cdc_assets.core.events import SchemaChange
from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.positions import MongoPosition
from cdc_assets.core.splits import KeyRange, Split, SplitPlan
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import CdcError, ConfigError, SourceSetupError, TableError, TableMissing, scrub
from cdc_assets.sources.mongodb import server
from cdc_assets.sources.mongodb.collections import ID, CollectionSpec, parse_collection, spec_from_schema
from cdc_assets.sources.mongodb.export import row_export
from cdc_assets.sources.mongodb.values import id_value, to_key

DAY_SECS = 86_400
PRESENT_CHUNK = 1000  # _ids per $in lookup
# What a failed export's text says when a document's value could not be carried (values.py, copy_text.py).
_REFUSED_VALUE = re.compile(r"(document .+? of \S+: field '[^']+' .+?)(?: -- (.+?))?(?:\n|$)")
_COPY_CONTEXT = re.compile(r'COPY \S+, line \d+, column (\S+?): "(.{0,80})')


class MongoSource:
    db_type = "mongo"
    row_versions = False

    def __init__(self, url: DbUrl, collections: Mapping[str, dict | None] | None = None, pipe: bool = True) -> None:
        """`pipe` (snapshot.pipe) changes nothing here: the splits are read by the MongoDB client in Spark tasks
        whatever it says, there being no JDBC read to fall back to."""
        self.url = url
        self.specs = {spec.table: spec for spec in (parse_collection(name, raw)
                                                    for name, raw in (collections or {}).items())}
        self._client: MongoClient | None = None

    @property
    def client(self) -> MongoClient:
        if self._client is None:
            self._client = server.connect(self.url.render(masked=False))
        return self._client

    def _reachable(self):
        return server.reachable(self.url, self.url.password or "")

    def check_capture(self) -> list[str]:
        """Change streams need a replica set or a sharded cluster (a standalone mongod has no oplog)."""
        with self._reachable():
            hello = self.client.admin.command("hello")
        if hello.get("msg") == "isdbgrid":
            return [f"{self.url} is a sharded cluster (mongos): each shard's oplog window bounds how long the "
                    "task may pause; check it on the shards (rs.printReplicationInfo())"]
        if not hello.get("setName"):
            raise SourceSetupError(
                f"MongoDB at {self.url} is a standalone server: change streams need a replica set or a sharded "
                "cluster", "start mongod with --replSet <name> and run rs.initiate() once (a one-member replica "
                "set is enough), then connect with ?replicaSet=<name> or ?directConnection=true")
        span = server.oplog_span(self.client)
        return oplog_notes(span[0].time, span[1].time) if span else oplog_notes(None, None)

    def spec(self, table: TableId) -> CollectionSpec:
        if table not in self.specs:
            raise ConfigError(f"collection {table} is not declared in source.collections",
                              f"add it: source.collections: {{{table}: {{}}}} (the whole document) or with fields")
        return self.specs[table]

    def added_fill(self, change: SchemaChange, names: list[str], before: TableSchema) -> AddedFill:
        return AddedFill()  # a collection declares no defaults

    def describe(self, table: TableId, split_column: str | None = None) -> TableSchema:
        spec = self.spec(table)
        if split_column not in (None, ID):
            raise ConfigError(f"source.split_columns names '{split_column}' for collection {table}: a collection "
                              "is split on _id, its only key", f"remove {table} from source.split_columns")
        with self._reachable():
            exists = self.client[table.namespace].list_collection_names(filter={"name": table.name})
        if not exists:
            raise TableMissing(f"collection {table} does not exist on {self.url}",
                               "check the database and collection names in source.collections")
        return spec.schema()

    def current_position(self) -> MongoPosition:
        with self._reachable():
            return server.current_position(self.client, list(self.specs))

    def plan(self, schema: TableSchema, split_size: int) -> SplitPlan:
        with self._reachable():
            rows = server.collection(self.client, schema.table).estimated_document_count()
            return server.plan_collection(self.client, schema.table, max(1, math.ceil(rows / split_size)), "")

    def export(self, plan: SplitPlan, schema: TableSchema, splits: list[Split], target: TargetFormat) -> RowExport:
        return row_export(self.url.render(masked=False), spec_from_schema(schema), schema, splits, target)

    def export_together(self, plan: SplitPlan, schema: TableSchema, splits: list[Split],
                        targets: list[TargetFormat]) -> list[RowExport]:
        """Each task yields one format's tuples: one read per format, shared by the targets of one engine."""
        made: dict[tuple, RowExport] = {}
        for t in targets:
            if (t.db_type, t.rows) not in made:
                made[(t.db_type, t.rows)] = self.export(plan, schema, splits, t)
        return [made[(t.db_type, t.rows)] for t in targets]

    def pipes_copy(self, target: TargetFormat) -> bool:
        return False  # Spark tasks read with pymongo, whatever the target

    def jdbc_endpoint(self) -> JdbcEndpoint | None:
        return None  # no JDBC driver reads MongoDB

    def explain_failure(self, schema: TableSchema, export: RowExport, error: Exception) -> CdcError | None:
        return explain(schema.table, self.url.password or "", str(error))

    def present_keys(self, schema: TableSchema, keys: list[tuple]) -> set[tuple]:
        """Looked up by `_id` with `$in`, which matches as the `_id` index compares (BSON order, binary strings);
        each found `_id` is turned back into its row key the way the snapshot made it."""
        spec = spec_from_schema(schema)
        coll = server.collection(self.client, schema.table)
        found: set = set()
        with self._reachable():
            for i in range(0, len(keys), PRESENT_CHUNK):
                ids = [id_value(key[0], spec) for key in keys[i:i + PRESENT_CHUNK]]
                found.update(_comparable(to_key(doc, spec)[0]) for doc in coll.find({ID: {"$in": ids}}, {ID: 1}))
        return {key for key in keys if _comparable(key[0]) in found}

    def read_split(self, schema: TableSchema, key_range: KeyRange, kind: str, target: TargetFormat,
                   rows_per_second: int = 0):
        self.hold_split(schema, key_range, kind, target)

    def changed_since(self, schema: TableSchema, key_range: KeyRange, kind: str, target: TargetFormat, read,
                      rows_per_second: int = 0):
        self.hold_split(schema, key_range, kind, target)

    def hold_split(self, schema: TableSchema, key_range: KeyRange, kind: str, target: TargetFormat | None = None,
                   lock_wait_secs: float = 0.0):
        # MongoDB has no lock that keeps writers out of an `_id` range, which the verification and repair rely on.
        raise CdcError(f"verification and split repair of {schema.table} are not supported for a MongoDB source yet",
                       "re-snapshot the collection (`cdc-assets plan --replan`, then snapshot) to make the target "
                       "equal to it")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def oplog_notes(first: int | None, last: int | None) -> list[str]:
    """The oplog window (first to last entry) as the plan prints it, with a warning when under a day."""
    if first is None or last is None:
        return ["oplog window unknown (no read access to local.oplog.rs): a pause longer than it loses the "
                "change stream's position"]
    window = last - first
    since = dt.datetime.fromtimestamp(first, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    notes = [f"oplog window {window / 3600:.1f} h (oldest entry {since}): the change stream can resume from "
             "positions inside it"]
    if window < DAY_SECS:
        notes.append("warning: the oplog window is under 1 day; a longer pause of the sync loses its position. "
                     "Grow it with replSetResizeOplog or oplogMinRetentionHours")
    return notes


def explain(table: TableId, password: str, text: str) -> CdcError | None:
    """A failed export's text (Spark wraps the executor's Python error) as the document and field it names."""
    text = scrub(text, password)
    refused = _REFUSED_VALUE.search(text)
    if refused:
        return TableError(refused.group(1), refused.group(2) or "declare the field with a kind that holds it")
    copy = _COPY_CONTEXT.search(text)
    if copy:
        return TableError(f"the target refused field '{copy.group(1)}' of a document of {table} (value "
                          f"{copy.group(2).rstrip(chr(34))!r})",
                          f"declare the field with a kind that holds it in source.collections.{table}, or leave "
                          "it out with source.exclude_columns")
    return None


def _comparable(value: object) -> object:
    return bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else value
