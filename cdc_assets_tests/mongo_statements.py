"""The few SQL statements the log-reader contract writes, carried out on MongoDB, so that the contract's scenarios run
unchanged against a replica set: a table is a collection, a row a document keyed by `_id`, BEGIN ... COMMIT one
multi-document transaction (one lsid/txnNumber in the change stream).

    CREATE TABLE t (c INT PRIMARY KEY, d VARCHAR(n), ..., [PRIMARY KEY (k2, k1)])
                                       -> create t; declared fields (a composite key: `_id` {k2, k1} as json)
    INSERT INTO t VALUES (..), (..)    -> insert_many
    UPDATE t SET c = v WHERE k = w     -> update_one $set; a key column: delete + insert (`_id` is immutable)
    DELETE FROM t [WHERE k = w]        -> delete_one / delete_many
    DROP TABLE t                       -> drop
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from pymongo import MongoClient

from cdc_assets.core.tables import TableId
from cdc_assets.sources.mongodb.collections import parse_collection
from cdc_assets.sources.mongodb.values import ejson

_CREATE = re.compile(r"^CREATE TABLE (\w+) \((.*)\)$")
_COLUMN = re.compile(r"^(\w+) (INT|VARCHAR\(\d+\))( PRIMARY KEY)?$")
_PK = re.compile(r"PRIMARY KEY \(([\w, ]+)\)")
_INSERT = re.compile(r"^INSERT INTO (\w+) VALUES (.*)$")
_UPDATE = re.compile(r"^UPDATE (\w+) SET (\w+) = (.+) WHERE (\w+) = (.+)$")
_DELETE = re.compile(r"^DELETE FROM (\w+)(?: WHERE (\w+) = (.+))?$")
_DROP = re.compile(r"^DROP TABLE (\w+)$")


@dataclass
class Table:
    columns: list[tuple[str, str]]  # (name, "int" | "string")
    key: list[str]

    def document(self, values: tuple) -> dict:
        row = dict(zip([c for c, _ in self.columns], values))
        return {"_id": self.id_of(row), **{c: v for c, v in row.items() if len(self.key) > 1 or c not in self.key}}

    def id_of(self, row: dict) -> object:
        return row[self.key[0]] if len(self.key) == 1 else {k: row[k] for k in self.key}

    def spec(self) -> dict:
        kinds = dict(self.columns)
        fields = {"_id": kinds[self.key[0]] if len(self.key) == 1 else "json"}
        fields.update({c: k for c, k in self.columns if len(self.key) > 1 or c not in self.key})
        return {"fields": fields}


class MongoStatements:
    """A DBAPI-shaped stand-in for a connection (`cursor()`, `execute`) that runs the contract's statements on one
    MongoDB database; `on_create(table_id, spec)` tells the source about each new collection's fields."""

    def __init__(self, client: MongoClient, database: str, on_create) -> None:
        self.client, self.db, self.on_create = client, client[database], on_create
        self.tables: dict[str, Table] = {}
        self._batch: list | None = None

    def cursor(self) -> "MongoStatements":
        return self

    def __enter__(self) -> "MongoStatements":
        return self

    def __exit__(self, *exc) -> None:
        return None

    def key(self, table: str, values: tuple) -> tuple:
        """The change-stream row key of the row whose SQL key is `values` (in the table's key order)."""
        t = self.tables[table]
        return (values[0],) if len(t.key) == 1 else (ejson(dict(zip(t.key, values))),)

    def execute(self, statement: str) -> None:
        if statement == "BEGIN":
            self._batch = []
        elif statement == "COMMIT":
            batch, self._batch = self._batch, None
            with self.client.start_session() as session:
                session.with_transaction(lambda s: [op(s) for op in batch])
        elif (m := _CREATE.match(statement)):
            self._create(m.group(1), m.group(2))
        elif self._batch is not None:
            self._batch.append(self._operation(statement))
        else:
            self._operation(statement)(None)

    def _create(self, name: str, body: str) -> None:
        key = [k.strip() for k in _PK.search(body).group(1).split(",")] if _PK.search(body) else []
        columns = []
        for part in re.split(r",\s*(?![^()]*\))", _PK.sub("", body).strip(", ")):
            m = _COLUMN.match(part.strip())
            columns.append((m.group(1), "int" if m.group(2) == "INT" else "string"))
            key += [m.group(1)] if m.group(3) else []
        self.tables[name] = Table(columns, key)
        self.db.create_collection(name)
        self.on_create(TableId(self.db.name, name), parse_collection(f"{self.db.name}.{name}", self.tables[name].spec()))

    def _operation(self, statement: str):
        if (m := _INSERT.match(statement)):
            table, rows = self.tables[m.group(1)], ast.literal_eval(f"[{m.group(2)}]")
            docs = [table.document(r if isinstance(r, tuple) else (r,)) for r in rows]
            return lambda s: self.db[m.group(1)].insert_many(docs, session=s)
        if (m := _UPDATE.match(statement)):
            return self._update(m.group(1), m.group(2), ast.literal_eval(m.group(3)), m.group(4),
                                ast.literal_eval(m.group(5)))
        if (m := _DELETE.match(statement)):
            coll = self.db[m.group(1)]
            if m.group(2) is None:
                return lambda s: coll.delete_many({}, session=s)
            return lambda s: coll.delete_one({"_id": ast.literal_eval(m.group(3))}, session=s)
        if (m := _DROP.match(statement)):
            return lambda s: self.db[m.group(1)].drop(session=s)
        raise ValueError(f"no MongoDB rendering of {statement!r}")

    def _update(self, name: str, column: str, value: object, where: str, key: object):
        coll, table = self.db[name], self.tables[name]
        if column not in table.key:
            return lambda s: coll.update_one({"_id": key}, {"$set": {column: value}}, session=s)

        def move(s) -> None:  # `_id` cannot change: the document leaves its old key and comes back under the new
            document = coll.find_one_and_delete({"_id": key}, session=s)
            coll.insert_one({**document, "_id": value}, session=s)
        return move
