"""A compacted batch of one table (`core.batches.TableChanges`) as one ordered list of bulk-write operations.

    delete             DeleteOne({_id})
    full row           ReplaceOne({_id}, document, upsert=True): the row whatever the target held
    partial row        UpdateOne({_id}, {$set: the columns it carries}): only those (no upsert: a key the target
                       lacks has no row to complete, as the SQL sinks' UPDATE finds none)
    move (key change   ReplaceOne({_id: new}, the old key's document as read before the batch with the columns
    with columns left  the log carried written over it, upsert=True); when the target is past the move (a
    out of the log)    replay: see `core.move_source`), UpdateOne of the new key; with neither document,
                       MoveIncomplete unless a later snapshot superseded it (`replaying_until`)

Deletes come first: they include the old keys of moves, whose documents were read before anything was written.
A NULL is written as null, as in full-row documents, so a partial row never needs $unset.
"""
from __future__ import annotations

from typing import Callable

from pymongo import DeleteOne, ReplaceOne, UpdateOne

from cdc_assets.core.batches import MoveIncomplete, TableChanges
from cdc_assets.core.move_source import MoveSource, move_source
from cdc_assets.core.positions import is_before
from cdc_assets.core.tables import TableSchema
from cdc_assets.errors import REPLAN_HINT
from cdc_assets.sinks.mongodb.documents import ID, document_id, to_document

Operation = DeleteOne | ReplaceOne | UpdateOne
Lookup = Callable[[object], dict | None]  # `_id` -> the target's document, read before the batch writes


def operations(schema: TableSchema, changes: TableChanges, lookup: Lookup, target: str = "the target"
               ) -> list[Operation]:
    """The batch's writes in order; `lookup` reads the documents moves come from (called before any write)."""
    moved = _moves(schema, changes, lookup, target)
    ops: list[Operation] = [DeleteOne({ID: document_id(key, schema)}) for key in sorted(changes.deletes, key=repr)]
    for row in changes.rows.values():
        document = to_document(row, schema)
        ops.append(ReplaceOne({ID: document[ID]}, document, upsert=True))
    ops += moved
    for row in changes.partial.values():
        ops += _update(schema, row)
    return ops


def _update(schema: TableSchema, row: dict) -> list[Operation]:
    fields = to_document(row, schema)
    _id = fields.pop(ID)
    return [UpdateOne({ID: _id}, {"$set": fields})] if fields else []


def _moves(schema: TableSchema, changes: TableChanges, lookup: Lookup, target: str) -> list[Operation]:
    """Which document a move takes its left-out columns from: `core.move_source` (without move marks: a replay
    after a crash is told apart only where the new key's document shows it)."""
    ops: list[Operation] = []
    for new, move in changes.moves.items():  # rare: two reads each
        origin = lookup(document_id(move.origin, schema))
        refilled = move.origin != new and (move.origin in changes.rows or move.origin in changes.moves)
        replaying = (changes.replaying_until is not None and move.position is not None
                     and not is_before(changes.replaying_until, move.position))
        source = move_source(origin_held=origin is not None, new_held=lookup(document_id(new, schema)) is not None,
                             vacated=move.vacated, refilled=refilled, replaying=replaying, applied=False)
        if source is MoveSource.ORIGIN:
            carried = to_document({**move.columns, **dict(zip(schema.primary_key, new))}, schema)
            document = {ID: carried[ID], **{k: v for k, v in origin.items() if k != ID}, **carried}
            ops.append(ReplaceOne({ID: document[ID]}, document, upsert=True))
        elif source is MoveSource.NEW_KEY:
            ops += _update(schema, {**move.columns, **dict(zip(schema.primary_key, new))})
        elif source is not MoveSource.SUPERSEDED:
            missing = [c.name for c in schema.columns if c.name not in move.columns]
            raise MoveIncomplete(
                f"cannot move the document of {schema.table} from key {move.origin} to {new} at {move.position}: "
                f"the log leaves out its unchanged column(s) {', '.join(missing)} and " +
                (f"{target} holds neither key" if source is not MoveSource.AMBIGUOUS else
                 f"the batch fills the old key again while the snapshot may have read it: {target}'s document "
                 "under the old key may be the moved row or the later one"),
                f"{REPLAN_HINT}; ALTER TABLE {schema.table} REPLICA IDENTITY FULL on the source (and on each of its "
                "partitions, for a partitioned table) makes the log carry whole rows")
    return ops
