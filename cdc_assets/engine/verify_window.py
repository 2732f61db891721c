"""A split compared with the target without holding anything on the source (core/verify_window.py judges).

    each round, at most ROUNDS:
      L = the source's log end          a plain read of the range (sources/split_read.py)       H = the log end
      wait until the checkpoint passed H: the target holds every change the read can have seen (after the first
        wait: no column of the source the log phase does not apply yet, engine/verify_sync.py)
      read the target's range; E = the log end: the target holds nothing past it
      the keys that changed in the window: the log from L (and from the round before's L: core/verify_window.py
      says why) to E, read by a reader of its own beside the sync's; or, where rows carry versions (PostgreSQL),
      the rows whose version is not the one read

Writers are never waited for, and verification takes no lock they could wait for or deadlock on.
"""
from __future__ import annotations

from dataclasses import dataclass

from cdc_assets.core.positions import is_before
from cdc_assets.core.row_digest import digest, key_text
from cdc_assets.core.splits import Split, SplitPlan
from cdc_assets.core.tables import TableSchema
from cdc_assets.core.verify_window import Rounds
from cdc_assets.engine.changed_keys import changed_in_log
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.verify_sync import KEEP_SYNCING, columns_not_applied, wait_for

ROUNDS = 6  # a key changing in every one of them is unsettled: verified by a later run


@dataclass(frozen=True)
class Window:
    """A split's rounds: what they found, the position the last one compared at, or why they could not end."""

    rounds: Rounds
    position: str = ""
    blocked: str = ""
    target_keys: dict[str, tuple] | None = None  # the target's key values by key text, of the last round


def compare_split(rt: TaskRuntime, plan: SplitPlan, schema: TableSchema, split: Split, wait_secs: float) -> Window:
    kinds = [c.kind for c in schema.columns]
    key_at = [i for k in schema.primary_key for i, c in enumerate(schema.columns) if c.name == k]
    key_kinds = [kinds[i] for i in key_at]
    text = lambda values: key_text(values, key_kinds)  # noqa: E731
    rounds, low, target_keys, position = Rounds(), None, {}, ""
    pace = rt.config.verify.rows_per_second
    while rounds.rounds < ROUNDS and not rounds.settled:
        start = rt.source.current_position()
        low = low or start
        read = rt.source.read_split(schema, split.range, plan.key_kind, rt.sink.target_format(), pace)
        high = rt.source.current_position()
        if not wait_for(rt, high, wait_secs)[0]:
            return Window(rounds, blocked=f"the checkpoint did not reach {high} within {wait_secs:.0f} s: "
                          f"{KEEP_SYNCING}")
        unmet = "" if rounds.rounds else columns_not_applied(rt, schema)
        if unmet:
            return Window(rounds, blocked=unmet)
        keys = [tuple(r[i] for i in key_at) for r in read.rows]
        target_rows = rt.sink.range_rows(schema, split.range, plan.key_kind, rt.config.source.db_type, keys)
        end = rt.source.current_position()
        if rt.source.row_versions:  # exact: a row's version changes with the write that makes it visible
            changed = rt.source.changed_since(schema, split.range, plan.key_kind, rt.sink.target_format(), read,
                                              pace)
            moved = recent = {text(k) for k in changed}
        else:
            logged = changed_in_log(rt, schema, low, end, text)
            if logged is None:
                return Window(rounds, blocked=f"the definition of {schema.table} changed between {low} and {end}: "
                              "verify again once the sync applied it")
            moved = {key for _, key in logged}
            recent = {key for at, key in logged if not is_before(at, start)}
        source = {text(k): digest(r, kinds) for k, r in zip(keys, read.rows)}
        target_keys, target = {}, {}
        for row in target_rows:
            key = tuple(row[i] for i in key_at)
            named = text(key)
            target_keys[named], target[named] = key, digest(row, kinds)
        rounds.judge(source, target, moved, recent)
        low, position = start, str(high)
    return Window(rounds, position=position, target_keys=target_keys)
