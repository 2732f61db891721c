"""pgoutput messages -> the engine's events: Transactions (or TransactionParts of a huge one) of the captured
tables, and SchemaChanges.

Facts this relies on (PostgreSQL 15 "Logical Decoding", "Logical Replication Message Flow"):
- pgoutput sends a transaction whole, once it committed: Begin, Relation (before the first change of a
  relation in a session and after its definition changed), Insert/Update/Delete/Truncate, Commit;
  transactions without published changes are not sent at all (PG >= 15);
- Commit's end LSN is the resume point; the server starts at max(requested LSN, slot's confirmed_flush_lsn)
  and skips every transaction whose commit record starts before it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter
from typing import Any

from cdc_assets.core.events import Op, RowChange, SchemaChange, Transaction, TransactionPart
from cdc_assets.core.positions import PgPosition
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.errors import SourceSetupError
from cdc_assets.sources.postgres import pgoutput
from cdc_assets.sources.postgres.catalog import Catalog
from cdc_assets.sources.postgres.drift import Shape, drift, recorded_shape, relation_shape
from cdc_assets.sources.postgres.partitions import refuse_partial_identity
from cdc_assets.sources.postgres.values import converter


@dataclass(frozen=True)
class _Relation:
    """What the last Relation message said about one relation id."""

    message: pgoutput.Relation
    table: TableId
    names: tuple[str, ...]
    converters: tuple[Callable[[str], Any] | None, ...]  # None: the value is its text
    key: tuple[str, ...] | None  # the captured table's key columns; None: not captured
    converted: tuple[tuple[int, str, Callable[[str], Any]], ...] = ()  # (index, name, converter) of each converter

    @cached_property
    def _key_values(self) -> Callable[[dict], tuple]:
        if len(self.key) == 1:
            (column,) = self.key
            return lambda row: (row[column],)
        return itemgetter(*self.key)

    def key_of(self, row: dict, op: Op) -> tuple:
        try:
            return self._key_values(row)
        except KeyError:
            missing = [k for k in self.key if k not in row]
            raise SourceSetupError(
                f"the log carries no value for key column(s) {', '.join(missing)} of {self.table} in a {op.value}",
                f"make the key the replica identity: ALTER TABLE {self.table} REPLICA IDENTITY USING INDEX <unique "
                f"index on ({', '.join(self.key)})>, or REPLICA IDENTITY FULL") from None

    def image(self, values: tuple, key_only: bool = False, old: tuple | None = None) -> dict:
        """Column name -> value. Unchanged TOASTed values are left out unless `old` (a full old row) has them."""
        if not key_only and old is None and pgoutput.UNCHANGED not in values:  # a whole row: most changes
            row = dict(zip(self.names, values))  # texts and NULLs as they are, then the columns to convert
            for i, name, convert in self.converted:
                if (value := values[i]).__class__ is str:
                    row[name] = convert(value)
            return row
        row = {}
        for i, (column, convert, value) in enumerate(zip(self.message.columns, self.converters, values)):
            if key_only and not column.is_key:
                continue
            if value is pgoutput.UNCHANGED and old is not None:
                value = old[i]
            if value is pgoutput.UNCHANGED:
                continue
            row[column.name] = value if convert is None or value.__class__ is not str else convert(value)
        return row


class Assembler:
    """Turns pgoutput messages into events:

        OUTSIDE --Begin--> INSIDE --Relation / Insert / Update / Delete / Truncate--> INSIDE --Commit--> OUTSIDE

    A Commit yields a Transaction of the captured changes, each positioned at the commit's end: PostgreSQL
    makes a transaction's changes visible at its commit, so that is where each of them takes effect. A Truncate
    of a captured table, and the first change read with a Relation that differs from the definition the table was
    read with so far (at first: its recorded schema, so DDL done while no run was reading counts too), yield a
    SchemaChange at once, positioned at the last commit end before it (resuming there replays its transaction).
    Transactions that end at or before `start` were applied already and yield nothing. With `part_events`, a
    transaction's changes are handed out in TransactionParts of that many (not positioned yet: the commit's end
    is unknown) whenever that many are held, and its Transaction holds the rest. A partition's changes count as
    its configured partitioned table's (`owners`). With `source_text`, a column outside the table's key keeps
    its text: no Python value is built that the sink would only print again.
    """

    def __init__(self, start: PgPosition, schemas: dict[TableId, TableSchema], cursor, catalog: Catalog,
                 part_events: int | None = None, owners: dict[TableId, TableId] | None = None,
                 source_text: bool = False) -> None:
        self.start = start
        self.part_events = part_events
        self.boundary = start  # the end of the last commit seen, or start
        self.schemas = schemas
        self.owners = owners or {}
        self.source_text = source_text
        self.cursor = cursor
        self.inside = False
        self.replayed = False
        self.begin: pgoutput.Begin | None = None
        self.pending: list[RowChange] = []  # of the transaction being read, positioned at its commit
        self.parted = False  # parts of the current transaction were handed out
        self.relations: dict[int, _Relation] = {}
        self.catalog = catalog
        self.accepted: dict[TableId, Shape] = {t: recorded_shape(s) for t, s in schemas.items()}
        self.unchecked: set[int] = set()  # relation ids whose last Relation no change has been read with yet
        self._handlers = {
            pgoutput.Begin: self._begin, pgoutput.Commit: self._commit, pgoutput.Relation: self._relation,
            pgoutput.Insert: self._insert, pgoutput.Update: self._update, pgoutput.Delete: self._delete,
            pgoutput.Truncate: self._truncate,
        }

    def feed(self, message: pgoutput.Message) -> Sequence[Transaction | TransactionPart | SchemaChange]:
        handler = self._handlers.get(message.__class__)  # Origin and Type tell us nothing we use
        items = handler(message) if handler else ()
        if self.inside and self.part_events and len(self.pending) >= self.part_events:
            return [*items, *self._parts()]
        return items

    def _parts(self) -> list[TransactionPart]:
        # Begin's final_lsn is where the commit record starts: the commit's end lies after it.
        n, floor = self.part_events, PgPosition(self.begin.final_lsn)
        parts = [TransactionPart(self.pending[i:i + n], floor) for i in range(0, len(self.pending) - n + 1, n)]
        self.pending, self.parted = self.pending[len(parts) * n:], True
        return parts

    def _begin(self, message: pgoutput.Begin) -> list:
        # A commit record never straddles `start` (a commit end or a keepalive's walEnd), so a transaction
        # whose commit record starts before it also ends at or before it.
        self.inside, self.begin, self.pending, self.parted = True, message, [], False
        self.replayed = message.final_lsn < self.start.lsn
        return []

    def _commit(self, message: pgoutput.Commit) -> list[Transaction]:
        self.inside, pending, self.pending = False, self.pending, []
        if self.replayed:
            return []
        end = self.boundary = PgPosition(message.end_lsn)
        if not pending and not self.parted:  # after parts the end must come: it is what commits them
            return []
        for change in pending:
            change.position = end
        return [Transaction(pending, end, message.commit_time.timestamp(), self.begin.xid)]

    def _relation(self, message: pgoutput.Relation) -> list:
        table = self._table_of(message)
        if message.replica_identity == "f" and table in self.owners.values():
            refuse_partial_identity(self.catalog, table, self.boundary)
        schema = self.schemas.get(table)
        key = schema.primary_key if schema else ()
        converters = tuple(None if self.source_text and c.name not in key
                           else converter(self.catalog.base_type(c.type_oid), self.cursor) for c in message.columns)
        names = tuple(c.name for c in message.columns)
        self.relations[message.relation_id] = _Relation(
            message, table, names, converters, schema and schema.primary_key,
            tuple((i, names[i], c) for i, c in enumerate(converters) if c is not None))
        self.unchecked.add(message.relation_id)
        return []

    def _table_of(self, message: pgoutput.Relation) -> TableId:
        known = self.relations.get(message.relation_id)
        named = TableId(message.namespace, message.name)
        return self.catalog.table_of(message.relation_id, self.owners.get(named, named),
                                     known.table if known is not None else None, self.boundary)

    def _check(self, relation_id: int, relation: _Relation) -> list[SchemaChange]:
        """Compare a relation's definition with the one its table was read with, on the first change read with
        it (pgoutput sends a Relation before that change, inside the same transaction)."""
        self.unchecked.discard(relation_id)
        shape = relation_shape(relation.message, self.catalog.type_name, self.schemas[relation.table].excluded)
        changed = drift(self.accepted[relation.table], shape)
        self.accepted[relation.table] = shape
        return [changed.schema_change(relation.table, self.boundary)] if changed else []

    def _truncate(self, message: pgoutput.Truncate) -> list[SchemaChange]:
        if self.replayed:
            return []
        tables = [self.relations[r].table for r in message.relation_ids]
        return [SchemaChange(t, f"TRUNCATE {t}", self.boundary) for t in tables if t in self.schemas]

    def _captured(self, relation_id: int) -> tuple[_Relation | None, Sequence[SchemaChange]]:
        """The relation of a change to apply, if captured, and how its definition changed."""
        relation = self.relations[relation_id]  # pgoutput sends a Relation before the first change of each
        if self.replayed or relation.key is None:
            return None, ()
        return relation, self._check(relation_id, relation) if relation_id in self.unchecked else ()

    def _insert(self, message: pgoutput.Insert) -> Sequence[SchemaChange]:
        relation, changed = self._captured(message.relation_id)
        if relation:
            after = relation.image(message.new)
            self.pending.append(RowChange(relation.table, Op.INSERT, relation.key_of(after, Op.INSERT), after))
        return changed

    def _update(self, message: pgoutput.Update) -> Sequence[SchemaChange]:
        relation, changed = self._captured(message.relation_id)
        if relation:
            before = None if message.old is None else relation.image(message.old, message.old_is_key)
            after = relation.image(message.new, old=None if message.old_is_key else message.old)
            # The new key wins; the old one fills unsent columns.
            key = relation.key_of(after if before is None else {**before, **after}, Op.UPDATE)
            self.pending.append(RowChange(relation.table, Op.UPDATE, key, after, before))
        return changed

    def _delete(self, message: pgoutput.Delete) -> Sequence[SchemaChange]:
        relation, changed = self._captured(message.relation_id)
        if relation:
            before = relation.image(message.old, message.old_is_key)
            self.pending.append(RowChange(relation.table, Op.DELETE, relation.key_of(before, Op.DELETE), None, before))
        return changed
