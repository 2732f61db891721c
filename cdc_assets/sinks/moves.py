"""How a batch's key moves (`core.batches.Move`) reach a SQL target: read, before the batch writes anything, the
row each move comes from (`core.move_source` decides which), so that the batch inserts a copy of it under the new
key and writes the columns the log carried over it like a partial row."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from cdc_assets.core.batches import MoveIncomplete, TableChanges
from cdc_assets.core.move_source import MoveSource, move_source
from cdc_assets.core.positions import is_before
from cdc_assets.core.tables import TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import REPLAN_HINT
from cdc_assets.sinks.move_marks import MoveMarks, applied, newest, point_of

# (cursor, schema, key) -> the target's row under `key`, every column in schema order, in a form the dialect
# writes back unchanged; None when there is none.
TargetRow = Callable[[object, TableSchema, tuple], "tuple | None"]


@dataclass(frozen=True)
class Moves:
    """How a batch's moves reach the target: copies of the old keys' rows inserted under the new keys, then the
    columns the log carried written over them like partial rows."""

    copies: dict[tuple, tuple]  # new key -> the old key's row, all columns in schema order, as `target_row` read it
    updates: dict[tuple, dict]  # new key -> the columns the log carried


def plan_moves(cursor, schema: TableSchema, changes: TableChanges, marks: MoveMarks, target_row: TargetRow,
               url: DbUrl) -> Moves:
    """Read, before the batch writes anything, the rows its moves come from (`core.move_source` decides which:
    the old key's row, or, when the target is past the move already, the new key's); a move whose unchanged
    columns neither key holds, or whose source the batch cannot tell, stops the batch. Advances the table's
    move mark (`marks`) in the same transaction."""
    copies: dict[tuple, tuple] = {}
    updates: dict[tuple, dict] = {}
    parts = changes.parts
    if parts is not None:
        _refilled_across_parts(schema, changes, url)
    if not changes.moves:
        if parts is not None:
            _written_by_part(parts, schema, changes, set())
        _note_replay(cursor, schema, changes, marks)
        return Moves(copies, updates)
    marked = marks.ready  # its table made by prepare_changes (a backfill prepares nothing)
    mark = marks.read(cursor, schema.table) if marked else None
    written, whole = {}, set()
    if parts is not None:  # judged by the mark as the transaction found it (core.batches.MovesAcrossParts)
        mark = parts.marks.setdefault(schema.table, mark)
        written, whole = parts.written.get(schema.table, {}), parts.whole.get(schema.table, set())
    copied_whole = set()
    for new, move in changes.moves.items():  # rare (key changes of rows with TOASTed values): two queries each
        row = target_row(cursor, schema, move.origin)
        refilled = move.origin != new and (move.origin in changes.rows or move.origin in changes.moves)
        replayed = applied(mark, point_of(move.position, changes.floor))
        source = move_source(origin_held=row is not None, new_held=target_row(cursor, schema, new) is not None,
                             vacated=move.vacated, refilled=refilled,
                             replaying=_superseded(move, changes.replaying_until, changes.floor),
                             applied=replayed, in_parts=changes.in_parts,
                             rewritten=_rewritten(written, new, move) or (mark is not None and mark.replayed),
                             origin_whole=move.origin in whole)
        if source is MoveSource.SUPERSEDED:
            continue
        if source in (MoveSource.LOST, MoveSource.AMBIGUOUS, MoveSource.REPLAYED_AWAY, MoveSource.OVERWRITTEN):
            raise _move_error(schema, new, move, source, changes.floor, url)
        if source is MoveSource.ORIGIN:
            copies[new] = row
            if parts is not None and _superseded(move, changes.replaying_until, changes.floor):
                parts.copied.setdefault(schema.table, set()).add(move.origin)
            if not replayed or move.origin in whole:
                copied_whole.add(new)
        updates[new] = move.columns
    if parts is not None:
        _written_by_part(parts, schema, changes, copied_whole)
    points = [p for m in changes.moves.values() if (p := point_of(m.position, changes.floor)) is not None]
    after = newest(mark, points)
    if marked and after is not None and after != mark:
        marks.write(cursor, schema.table, after)
    else:
        _note_replay(cursor, schema, changes, marks)
    return Moves(copies, updates)


def _note_replay(cursor, schema: TableSchema, changes: TableChanges, marks: MoveMarks) -> None:
    """A batch that writes a table's rows before its mark (a replay) leaves the rows under keys the mark's moves
    filled as they were before those moves: when the mark lies past the batch, later batches replay moves it
    covers, and must not take those rows for the moved ones. Flagged on the mark in the batch's transaction (a
    transaction in parts judges its own moves by the mark it found first)."""
    point = point_of(changes.last, changes.floor)
    if point is None or str(schema.table) not in marks.marked():
        return
    mark = marks.read(cursor, schema.table)
    if mark is None or mark.replayed:
        return
    if changes.parts is not None:
        changes.parts.marks.setdefault(schema.table, mark)
    if applied(mark, point) and not applied(point, mark):  # at or before the mark, and not at it
        marks.write(cursor, schema.table, replace(mark, replayed=True))


def _refilled_across_parts(schema: TableSchema, changes: TableChanges, url: DbUrl) -> None:
    """A part that touches an old key an earlier part copied a moved row from, over a snapshot: the earlier
    part may have copied the later row a split read there (`MoveSource.AMBIGUOUS`), so the transaction stops."""
    copied = changes.parts.copied.get(schema.table)
    if not copied:
        return
    again = copied & changes.touched()
    if again:
        key = min(again, key=repr)
        raise MoveIncomplete(
            f"cannot move rows of {schema.table} in a transaction handed out in parts, committed after "
            f"{changes.floor}: an earlier part moved the row of key {key} away, replayed over the snapshot (at or "
            f"before its high watermarks), and a later part fills that key again: the target's row under it on "
            f"{url} may have been the moved row or the later one",
            f"{REPLAN_HINT}; ALTER TABLE {schema.table} REPLICA IDENTITY FULL on the source (and on each of its "
            "partitions, for a partitioned table) makes the log carry whole rows; a larger "
            "pipeline.transaction_part_events keeps such a transaction in one part")


def _written_by_part(parts, schema: TableSchema, changes: TableChanges, copied_whole: set[tuple]) -> None:
    """What this part leaves the later parts of the transaction: the keys it wrote (with the columns, where it
    wrote only some), and which of them the target holds whole as the source had them (a row written whole, a copy
    of such a row; columns written over one keep it so): a replay's later part judges its moves by them
    (`core.move_source`)."""
    table = schema.table
    written = parts.written.setdefault(table, {})
    for key in (*changes.rows, *changes.deletes, *changes.moves, *(m.origin for m in changes.moves.values())):
        written[key] = None
    for key, columns in changes.partial.items():
        if key not in written or written[key] is not None:
            written[key] = written.get(key, frozenset()) | columns.keys()
    whole = parts.whole.setdefault(table, set())
    whole -= changes.deletes | set(changes.moves) | {m.origin for m in changes.moves.values()}
    whole |= set(changes.rows) | copied_whole


def _rewritten(written: dict, new: tuple, move) -> bool:
    """Did an earlier part write the new key other than by columns the move writes over again?"""
    if new not in written:
        return False
    columns = written[new]
    return columns is None or not columns <= move.columns.keys()


def _superseded(move, replaying_until, floor=None) -> bool:
    """Is the move within the snapshot's replay (at or before the table's horizon)? A move of a transaction in
    parts is not positioned until its commit, which lies somewhere after the floor: it may be within the replay
    unless the floor is past the horizon already."""
    if replaying_until is None:
        return False
    if move.position is not None:
        return not is_before(replaying_until, move.position)
    return floor is not None and is_before(floor, replaying_until)


def _move_error(schema: TableSchema, new: tuple, move, source: MoveSource, floor, url: DbUrl) -> MoveIncomplete:
    missing = ", ".join(c.name for c in schema.columns if c.name not in move.columns)
    why = {MoveSource.LOST: "the target on {url} holds neither key",
           MoveSource.AMBIGUOUS: "the move is replayed over the snapshot (at or before its high watermarks) and "
           "the batch fills the old key again after it: the target's row under the old key on {url} may be the "
           "moved row or the later one",
           MoveSource.REPLAYED_AWAY: "the target on {url} applied the move before (a replay after a crash) but "
           "no longer holds the row under the new key",
           MoveSource.OVERWRITTEN: "the target on {url} applied the move before (a replay after a crash or a "
           "reset), and the replay wrote the table since (an earlier part of the transaction, or a batch before "
           "this one), but not the old key's row whole: neither key is known to hold the moved row"}[source]
    at = move.position if move.position is not None else f"the transaction committed after {floor}"
    return MoveIncomplete(
        f"cannot move the row of {schema.table} from key {move.origin} to {new} at {at}: the log "
        f"leaves out its unchanged column(s) {missing} and " + why.format(url=url),
        f"{REPLAN_HINT}; ALTER TABLE {schema.table} REPLICA IDENTITY FULL on the source (and on each of its "
        "partitions, for a partitioned table) makes the log carry whole rows")
