"""Where a moved row's unchanged columns come from when the target may already hold the batch's own result.

A move (see `core.batches.Move`) takes the columns its key change left out of the log from the row the target
holds under the old key as of the batch start. After a crash between the target's commit and the checkpoint, or
over a snapshot read after the move, the batch replays over a target that is past it: the old key may hold a row
the source inserted (or moved) there later, and the moved row is under the new key already. Which state the
target is in is decided from what the batch knows:

- the target committed the move before (its move mark, `sinks.move_marks`): the row under the new key is the
  moved one, further changed; none there: a later change removed it, and the replay gets to it; but in a
  transaction handed out in parts, this replay's earlier part may have deleted it (a key the target had filled
  again since): the batch stops. Nor is it the moved one when this replay's earlier part wrote the new key (it
  put back what the key held before the move): the old key's row is then the one to copy if an earlier part
  wrote it whole (it is the source's row as the move found it), and the batch stops otherwise;
- the new key had no change earlier in the batch, so the source had no row there at the batch start: a target row
  under it means the target is past the move (a snapshot read it), and that row is the moved one;
- otherwise the target's row under the old key is the one to copy, unless the move is within the snapshot's
  replay and the batch fills the old key again after it: a split read after that refill holds the later row
  there, and nothing in the batch tells the two apart, so the batch stops.
"""
from __future__ import annotations

from enum import Enum


class MoveSource(Enum):
    ORIGIN = "copy the target's row under the old key, then write the log's columns over it"
    NEW_KEY = "write the log's columns over the target's row under the new key (the target is past the move)"
    SUPERSEDED = "nothing: a snapshot read after the move, when the new key's row was gone again"
    LOST = "neither key holds the row: its unchanged columns are lost"
    AMBIGUOUS = "the old key's row may be the moved row or a later one: the batch cannot tell"
    REPLAYED_AWAY = "the target applied the move before, and no longer holds the moved row under the new key"
    OVERWRITTEN = "the target applied the move before, and this replay wrote the new key since, not the old key whole"


def move_source(*, origin_held: bool, new_held: bool, vacated: bool, refilled: bool, replaying: bool,
                applied: bool, in_parts: bool = False, rewritten: bool = False,
                origin_whole: bool = False) -> MoveSource:
    """`origin_held`/`new_held`: the target has a row under the old/new key at the batch start; `vacated`: the batch
    freed the new key before the move (so the target may hold an older row there on a first run); `refilled`: the
    batch gives the old key a row again after the move; `replaying`: the move is at or before the table's snapshot
    horizon (a snapshot read may be past it); `applied`: the target committed this move, or a later one, before
    (`sinks.move_marks`): it is past the move; `in_parts`: the batch is a part of a transaction whose earlier parts
    this replay applied already; `rewritten`: such an earlier part wrote, deleted or moved the new key (other than
    by columns the move writes again); `origin_whole`: such earlier parts left the old key's row as the source had
    it (written whole, then changed only by columns)."""
    if applied:
        if rewritten:
            return MoveSource.ORIGIN if origin_held and origin_whole else MoveSource.OVERWRITTEN
        if new_held:
            return MoveSource.NEW_KEY
        # Gone from the new key: a later change removed it (the replay gets to it), unless this replay's own
        # earlier part of the transaction may have (deleting a key the target had filled again since).
        return MoveSource.REPLAYED_AWAY if in_parts else MoveSource.SUPERSEDED
    if new_held and not vacated:
        return MoveSource.NEW_KEY
    if not origin_held:
        if new_held:
            return MoveSource.NEW_KEY
        return MoveSource.SUPERSEDED if replaying else MoveSource.LOST
    if replaying and refilled:
        return MoveSource.AMBIGUOUS
    return MoveSource.ORIGIN
