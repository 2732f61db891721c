"""Which row a replayed key move (unchanged TOAST, REPLICA IDENTITY DEFAULT) takes its unchanged columns from, and
the move marks that tell a target past the move."""
import pytest

from cdc_assets.core.move_source import MoveSource, move_source
from cdc_assets.core.positions import PgPosition
from cdc_assets.sinks.move_marks import MovePoint, applied, newest, point_of

ORIGIN, NEW_KEY, SUPERSEDED, LOST, AMBIGUOUS, REPLAYED_AWAY, OVERWRITTEN = (
    MoveSource.ORIGIN, MoveSource.NEW_KEY, MoveSource.SUPERSEDED, MoveSource.LOST, MoveSource.AMBIGUOUS,
    MoveSource.REPLAYED_AWAY, MoveSource.OVERWRITTEN)


@pytest.mark.parametrize("origin_held, new_held, vacated, refilled, replaying, applied_, in_parts, want", [
    (True, False, False, False, False, False, False, ORIGIN),  # a first run
    (True, False, False, True, False, False, False, ORIGIN),  # old key re-inserted later in the batch: a first run
    (True, True, False, True, False, False, False, NEW_KEY),  # the source had the new key free: the target is past
    (True, True, False, True, True, False, False, NEW_KEY),  # ... read by the snapshot, with the re-inserted old key
    (True, True, True, False, False, False, False, ORIGIN),  # the new key freed earlier in the batch: its row is older
    (True, True, True, True, False, True, False, NEW_KEY),  # a swap the target committed before (its mark)
    (True, False, True, True, False, True, False, SUPERSEDED),  # committed before, the new key's row gone since
    (False, False, False, False, False, True, True, REPLAYED_AWAY),  # ... or deleted by this replay's earlier part
    (False, True, True, False, False, False, False, NEW_KEY),
    (False, False, False, False, True, False, False, SUPERSEDED),  # a snapshot read after the move and a later delete
    (False, False, False, False, False, False, False, LOST),
    (True, True, True, True, True, False, False, AMBIGUOUS),  # over the snapshot, old key refilled: which row is it?
    (True, False, False, True, True, False, False, AMBIGUOUS),
    (True, False, False, False, True, False, False, ORIGIN),
])
def test_move_source(origin_held, new_held, vacated, refilled, replaying, applied_, in_parts, want):
    assert move_source(origin_held=origin_held, new_held=new_held, vacated=vacated, refilled=refilled,
                       replaying=replaying, applied=applied_, in_parts=in_parts) is want


@pytest.mark.parametrize("origin_held, new_held, origin_whole, want", [
    (True, True, True, ORIGIN),  # the replay's earlier part put both rows back as they were before the move
    (True, True, False, OVERWRITTEN),  # the old key's row may be a later one: neither key holds the moved row
    (True, False, True, ORIGIN),  # the earlier part deleted the new key (its row before the move)
    (False, False, True, OVERWRITTEN),
])
def test_a_replayed_move_whose_new_key_an_earlier_part_of_the_replay_wrote(origin_held, new_held, origin_whole,
                                                                          want):
    """The target committed the transaction; its replay's earlier part wrote the new key again, with what the key
    held before the move: that is no longer the moved row."""
    assert move_source(origin_held=origin_held, new_held=new_held, vacated=True, refilled=True, replaying=False,
                       applied=True, in_parts=True, rewritten=True, origin_whole=origin_whole) is want


def test_a_move_mark_covers_its_own_position_and_those_before_it():
    mark = MovePoint(PgPosition(100))
    assert applied(mark, MovePoint(PgPosition(100))) and applied(mark, MovePoint(PgPosition(99)))
    assert not applied(mark, MovePoint(PgPosition(101)))
    assert not applied(None, MovePoint(PgPosition(1))) and not applied(mark, None)


def test_a_part_of_a_transaction_lies_just_after_its_floor():
    """A part's changes are not positioned before the commit: after its floor, before any later transaction."""
    part = point_of(None, PgPosition(100))
    assert part == MovePoint(PgPosition(100), after=True)
    assert applied(part, part) and not applied(MovePoint(PgPosition(100)), part)
    assert applied(part, MovePoint(PgPosition(100))) and not applied(part, MovePoint(PgPosition(101)))
    assert MovePoint.from_json(part.to_json()) == part


def test_the_mark_only_grows():
    mark = MovePoint(PgPosition(200))
    assert newest(mark, [MovePoint(PgPosition(150))]) == mark  # a replay does not lower it
    assert newest(mark, [MovePoint(PgPosition(150)), MovePoint(PgPosition(300))]) == MovePoint(PgPosition(300))
    assert newest(None, []) is None
