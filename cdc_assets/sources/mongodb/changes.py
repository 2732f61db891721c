"""Change-stream events as the engine's row changes, and the collection-level events that stop a stream.

Events are shaped as "Change Events" shows them (https://www.mongodb.com/docs/manual/reference/change-events/):
`_id` (the resume token `{"_data": hex}`), `operationType`, `clusterTime` (bson Timestamp), `wallTime` (6.0+),
`ns` `{db, coll}`, `documentKey` `{_id, <shard key>}`, `fullDocument`, `fullDocumentBeforeChange`,
`updateDescription` `{updatedFields, removedFields, truncatedArrays}`, `to` (rename), `lsid` + `txnNumber`.

    insert                -> INSERT of fullDocument
    replace               -> UPDATE with fullDocument (a replacement always carries the whole new document)
    update, fullDocument  -> UPDATE with fullDocument (updateLookup: the majority-committed document at lookup
                             time, maybe newer than this event; the later events bring the same or newer)
    update, fullDocument null under updateLookup
                          -> nothing: the lookup found no document, so it was deleted after this update and
                             that delete (or the collection's drop) comes later in this same stream. Writing
                             the update from updateDescription alone could not make a whole row anyway.
    update, no fullDocument (not requested, or a post-image that expired)
                          -> a partial UPDATE from updateDescription when every touched path is a declared
                             top-level field (removed fields become NULL); otherwise `ChangeNotApplicable`
    delete                -> DELETE of documentKey._id (fullDocumentBeforeChange, when pre-images are on, as
                             `before`)
    drop, rename, dropDatabase, invalidate
                          -> `CollectionEnded` when a captured collection is concerned (renamed away, or
                             replaced by a rename onto its name): the engine stops there; an invalidate always
                             ends the stream
    create, createIndexes, dropIndexes, modify, shardCollection, reshardCollection,
    refineCollectionShardKey (showExpandedEvents) -> nothing: no document changes
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

from cdc_assets.core.events import Op, RowChange, SchemaChange, SchemaChangeKind
from cdc_assets.core.positions import MongoPosition
from cdc_assets.core.tables import TableId
from cdc_assets.errors import CdcError
from cdc_assets.sources.mongodb.collections import ID, CollectionSpec
from cdc_assets.sources.mongodb.values import to_key, to_row, to_value

UPDATE_LOOKUP = "updateLookup"  # fullDocument modes of `watch()`
WHEN_AVAILABLE = "whenAvailable"
REQUIRED = "required"
DEFAULT = "default"  # no fullDocument on updates

_ENDING = ("drop", "rename", "dropDatabase", "invalidate")
_HARMLESS = ("create", "createIndexes", "dropIndexes", "modify", "shardCollection", "reshardCollection",
             "refineCollectionShardKey")
_REPLAN = "re-plan and re-snapshot the task: cdc-assets plan --replan"


class ChangeNotApplicable(CdcError):
    """A change stream event that cannot be turned into a row change without guessing (an unknown event, an
    update without its full document). Way out: the hint (docs/connectors/mongodb.md)."""


@dataclass(frozen=True)
class CollectionEnded:
    """A captured collection (or its database) went away under the stream: the engine stops here.

    `position` is the event's own token; `invalidate` also ends the change stream itself (a collection stream
    after its collection's drop or rename), which can then only be reopened with `startAfter`, never resumed."""

    event: str  # operationType: drop, rename, dropDatabase, invalidate
    table: TableId | None  # None for dropDatabase (`database` says which) and invalidate
    position: MongoPosition
    database: str | None = None
    renamed_to: TableId | None = None
    onto_captured: bool = False  # a rename of an uncaptured collection over a captured one (dropTarget)

    @property
    def ends_stream(self) -> bool:
        return self.event == "invalidate"

    @property
    def hint(self) -> str:
        if self.event == "rename" and self.onto_captured:
            return f"{self.renamed_to} now holds what was {self.table}: {_REPLAN}"
        if self.event == "rename":
            return (f"capture {self.renamed_to} instead: put it in source.collections in place of {self.table}, "
                    f"then {_REPLAN}")
        if self.event == "invalidate":
            return f"the change stream cannot be resumed past an invalidate: {_REPLAN}"
        return (f"remove the collection from source.collections (the target keeps its table), or when it is created "
                f"again, {_REPLAN}")

    def describe(self) -> str:
        what = {"drop": f"collection {self.table} was dropped",
                "rename": f"collection {self.table} was renamed to {self.renamed_to}",
                "dropDatabase": f"database {self.database} was dropped",
                "invalidate": "the change stream was invalidated"}[self.event]
        return f"{what} at {self.position}"

    def as_schema_change(self) -> SchemaChange:
        # A dropped, renamed or invalidated collection is never one the engine can follow.
        return SchemaChange(self.table, f"{self.event}: {self.describe()}", self.position, SchemaChangeKind.OTHER)


def position_of(event: dict) -> MongoPosition:
    time = event["clusterTime"]
    return MongoPosition(event["_id"]["_data"], (time.time, time.inc))


def position_from_token(token: dict) -> MongoPosition:
    """A resume token without its event (a postBatchResumeToken): its cluster time is read from the token."""
    bare = MongoPosition(token["_data"], (0, 0))
    return MongoPosition(bare.resume_token, bare.token_time)


def commit_time(event: dict) -> float:
    wall = event.get("wallTime")
    if isinstance(wall, dt.datetime):
        return (wall if wall.tzinfo else wall.replace(tzinfo=dt.timezone.utc)).timestamp()
    return float(event["clusterTime"].time)


def to_change(event: dict, specs: dict[TableId, CollectionSpec], full_document: str = UPDATE_LOOKUP
              ) -> RowChange | CollectionEnded | None:
    """The row change of one event (None when it changes no captured row); raises ChangeNotApplicable."""
    kind = event["operationType"]
    if kind in _ENDING:
        ended = _ended(event)
        if ended.event == "rename" and ended.table not in specs:
            ended = replace(ended, onto_captured=True)
        return ended if _concerns(ended, specs) else None
    if kind in _HARMLESS:
        return None
    ns = event.get("ns") or {}
    spec = specs.get(TableId(ns.get("db", ""), ns.get("coll", "")))
    if spec is None:
        return None
    key = to_key(event["documentKey"], spec)
    before = event.get("fullDocumentBeforeChange")
    before_row = to_row(before, spec) if before is not None else None
    position = position_of(event)
    if kind == "delete":
        return RowChange(spec.table, Op.DELETE, key, None, before_row, position)
    if kind in ("insert", "replace"):
        op = Op.INSERT if kind == "insert" else Op.UPDATE
        return RowChange(spec.table, op, key, to_row(event["fullDocument"], spec), before_row, position)
    if kind != "update":
        raise ChangeNotApplicable(f"change stream event {kind!r} on {spec.table} at {position} is not one this "
                                  "reader knows", "upgrade cdc_assets, or report the event")
    document = event.get("fullDocument")
    if document is not None:
        return RowChange(spec.table, Op.UPDATE, key, to_row(document, spec), before_row, position)
    if "fullDocument" in event and full_document == UPDATE_LOOKUP:
        return None  # deleted since: its delete follows in this stream (module docstring)
    after = _partial(event, spec, key, position)
    return RowChange(spec.table, Op.UPDATE, key, after, before_row, position)


def _ended(event: dict) -> CollectionEnded:
    ns, position = event.get("ns") or {}, position_of(event)
    table = TableId(ns["db"], ns["coll"]) if "coll" in ns else None
    to = event.get("to")
    renamed = TableId(to["db"], to["coll"]) if to else None
    return CollectionEnded(event["operationType"], table, position, ns.get("db"), renamed)


def _concerns(ended: CollectionEnded, specs: dict[TableId, CollectionSpec]) -> bool:
    """Does it touch a captured collection? (a rename onto a captured name replaces that collection)"""
    if ended.event == "invalidate":
        return True
    if ended.event == "dropDatabase":
        return any(t.namespace == ended.database for t in specs)
    return ended.table in specs or ended.renamed_to in specs


def _partial(event: dict, spec: CollectionSpec, key: tuple, position: MongoPosition) -> dict:
    """The declared top-level fields an update touched, from updateDescription alone."""
    description = event.get("updateDescription") or {}
    declared = {f.name: f for f in spec.fields or ()}
    changed = dict(description.get("updatedFields") or {})
    removed = list(description.get("removedFields") or [])
    truncated = [t["field"] for t in description.get("truncatedArrays") or []]
    paths = [*changed, *removed, *truncated]
    partly = [p for p in paths if p.split(".", 1)[0] in declared and ("." in p or p in truncated)]
    if spec.fields is None or partly:
        touched = "the whole document" if spec.fields is None else ", ".join(partly)
        raise ChangeNotApplicable(
            f"an update of document {key[0]!r} in {spec.table} at {position} carries no full document, and its "
            f"change to {touched} cannot be written without one",
            "watch with full_document='updateLookup' (or enable changeStreamPreAndPostImages with "
            f"full_document='required'), then {_REPLAN}")
    after = {ID: key[0]}
    for field in spec.fields:
        if field.name in removed:
            after[field.name] = None
        elif field.name in changed and field.name != ID:
            after[field.name] = to_value(changed[field.name], field, spec, event["documentKey"])
    return after
