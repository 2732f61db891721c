"""How lock-free rounds judge a split's keys (core/verify_window.py): only keys that changed in a round's window
or differed in the first read are judged again; a difference is certain only once it held without a change."""
from cdc_assets.core.verify_window import Rounds


def test_a_quiet_split_is_settled_in_one_round():
    rounds = Rounds()
    rounds.judge({"1": "a", "2": "b"}, {"1": "a", "2": "b"}, set())
    assert rounds.settled and rounds.diff().equal and rounds.rounds == 1 and rounds.rechecked == 0


def test_a_difference_is_a_suspect_until_a_second_round_sees_it_again_unchanged():
    rounds = Rounds()
    rounds.judge({"1": "a", "2": "b", "3": "c"}, {"1": "a", "2": "x", "4": "d"}, set())
    assert not rounds.settled and rounds.diff().equal  # nothing certain from the first read alone
    assert rounds.pending == {"2", "3", "4"}
    rounds.judge({"1": "a", "2": "b", "3": "c"}, {"1": "a", "2": "x", "4": "d"}, set())
    diff = rounds.diff()
    assert rounds.settled and (diff.missing, diff.extra, diff.changed) == (["3"], ["4"], ["2"])
    assert rounds.rechecked == 3 and diff.source_rows == 3 and diff.target_rows == 3


def test_a_difference_from_a_commit_not_visible_yet_clears():
    """A MySQL commit in the binlog before the low watermark but not visible to the read: the target has it."""
    rounds = Rounds()
    rounds.judge({"1": "old"}, {"1": "new"}, set())
    rounds.judge({"1": "new"}, {"1": "new"}, set())
    assert rounds.settled and rounds.diff().equal


def test_keys_changed_in_the_window_are_judged_again_and_may_stay_unsettled():
    rounds = Rounds()
    rounds.judge({"1": "a", "2": "b"}, {"1": "a2", "2": "b"}, moved={"1"})
    assert rounds.pending == {"1"}
    rounds.judge({"1": "a3", "2": "b"}, {"1": "a4", "2": "b"}, moved={"1"})
    assert rounds.pending == {"1"} and rounds.diff().equal  # still moving: unsettled, never "different"
    assert rounds.unsettled == {"1"}


def test_a_later_difference_counts_only_when_unchanged_since_the_round_before():
    rounds = Rounds()
    rounds.judge({"1": "a"}, {"1": "b"}, set())
    # Changed between the first round's low watermark and this one's (`moved`), not in this round (`recent`):
    rounds.judge({"1": "c"}, {"1": "d"}, moved={"1"}, recent=set())
    assert rounds.pending == {"1"} and rounds.diff().equal
    rounds.judge({"1": "c"}, {"1": "d"}, set())
    assert rounds.settled and rounds.diff().changed == ["1"]


def test_an_equal_key_changed_in_the_round_is_judged_again():
    rounds = Rounds()
    rounds.judge({"1": "a"}, {"1": "a"}, moved={"1"})
    assert rounds.pending == {"1"}
    rounds.judge({"1": "b"}, {"1": "b"}, moved={"1"}, recent=set())
    assert rounds.settled and rounds.diff().equal
