"""The commit policy's decisions over targets' positions: which may fail, when a split or batch counts as done,
and the task's checkpoint."""
import pytest

from cdc_assets.core.commit_policy import CommitPolicy
from cdc_assets.core.positions import PgPosition

A, B, C = PgPosition(100), PgPosition(200), PgPosition(300)
TARGETS = {"a": True, "b": True, "c": False}


def test_all_needs_every_target_and_takes_the_earliest():
    policy = CommitPolicy.parse("all", TARGETS)
    assert not any(policy.tolerates(n) for n in TARGETS)
    assert policy.met({"a", "b", "c"}) and not policy.met({"a", "b"})
    assert policy.checkpoint({"a": C, "b": A, "c": B}) == A
    assert policy.checkpoint({"a": C, "b": A, "c": None}) is None


def test_required_lets_an_optional_target_lag_or_fail():
    policy = CommitPolicy.parse("required", TARGETS)
    assert policy.tolerates("c") and not policy.tolerates("a")
    assert policy.met({"a", "b"}) and not policy.met({"a", "c"})
    assert policy.checkpoint({"a": C, "b": B, "c": A}) == B
    assert policy.checkpoint({"a": C, "b": B, "c": None}) == B
    assert "['b']" in policy.missing({"a", "c"})


def test_quorum_takes_the_nth_furthest():
    policy = CommitPolicy.parse("quorum(2)", TARGETS)
    assert all(policy.tolerates(n) for n in TARGETS)
    assert policy.met({"a", "c"}) and not policy.met({"b"})
    assert policy.checkpoint({"a": A, "b": C, "c": B}) == B
    assert policy.checkpoint({"a": A, "b": None, "c": None}) is None
    assert CommitPolicy.parse("quorum(3)", TARGETS).checkpoint({"a": A, "b": C, "c": B}) == A
    assert not CommitPolicy.parse("quorum(3)", TARGETS).tolerates("c")


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError):
        CommitPolicy.parse("most", TARGETS)
