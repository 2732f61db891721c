"""The lanes of one session: one per target still applying the log, under `pipeline.commit_policy`.

Several targets share one reader: each lane (engine/lane.py) applies the log from its own checkpoint in its own
target transactions, skipping what it holds already, so a target that was down catches up without replaying
what the others applied. A target the policy tolerates may be down, waiting for its snapshot, or lost at the
start, and may fail on the way: it leaves the session and the others go on; one that answers again rejoins (the
session restarts from the earliest checkpoint). With one target, any failure is the run's.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from cdc_assets.core.positions import Position, earliest, is_before
from cdc_assets.core.read_limit import ChangePacer
from cdc_assets.engine.lane import Lane
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.schema_follower import MEMBERSHIP_CHECK_SECS, Restart
from cdc_assets.engine.sync_report import SyncReport
from cdc_assets.engine.target_down import one_line, target_down
from cdc_assets.errors import CdcError, PlanError, PositionLost, UnreachableError

log = logging.getLogger("cdc_assets.incremental")


class TargetLanes:
    def __init__(self, rt: TaskRuntime, report: SyncReport, stop: threading.Event, on_batch: Callable | None,
                 acknowledge: Callable[[], None]) -> None:
        self.rt, self.report, self.policy = rt, report, rt.policy
        self.several = len(rt.lanes) > 1
        self.lanes: list[Lane] = []
        self.checked = time.monotonic()
        self.pacer: ChangePacer | None = None
        for lane_rt in rt.lanes:
            own = report.targets.setdefault(lane_rt.name, SyncReport()) if self.several else report
            try:
                if self.several:
                    lane_rt.sink  # a target that is down is found here, not in its first batch
                self.lanes.append(Lane(lane_rt, own, stop, on_batch, acknowledge))
            except Exception as exc:
                self._drop_at_start(lane_rt, exc)
                continue
            report.target_states.pop(lane_rt.name, None)
        self._policy_met()
        self._drop_lost()

    def __iter__(self):
        return iter(list(self.lanes))

    def __bool__(self) -> bool:
        return bool(self.lanes)

    @property
    def positions(self) -> list[Position]:
        return [lane.position for lane in self.lanes]

    @property
    def settled(self) -> bool:
        return all(lane.settled for lane in self.lanes)

    def pace(self, pacer: ChangePacer) -> None:
        """The lanes apply the same log in step: the first one still applying paces them all."""
        self.pacer = pacer
        for i, lane in enumerate(self.lanes):
            lane.applier.pacer = pacer if i == 0 else None

    def step(self, item, drained: Callable[[float], bool]) -> None:
        """Hand `item` to every lane. A lane that follows a schema change restarts the session only once every lane
        took the item: one that had not met it yet would read the log again with the new definitions, and never
        meet the change its target has to follow."""
        restart = None
        for lane in list(self.lanes):
            try:
                self._guarded(lane, lane.step, item, drained)
            except Restart as exc:
                restart = exc
        if restart is not None:
            raise restart

    def finish(self) -> None:
        for lane in list(self.lanes):
            self._guarded(lane, lane.finish)

    def _guarded(self, lane: Lane, step: Callable, *args) -> None:
        """Run a lane's step; a target the policy tolerates that fails leaves the session, the others go on."""
        try:
            step(*args)
        except Exception as exc:
            if not self.several or not target_down(exc) or not self.policy.tolerates(lane.rt.name):
                raise
            lane.abandon()
            self.lanes.remove(lane)
            self._record_out(lane.rt, f"down since {lane.position}: {one_line(exc)}")
            if self.pacer is not None:
                self.pace(self.pacer)
            self._policy_met()

    def rejoin(self) -> None:
        """Every MEMBERSHIP_CHECK_SECS: a target that was down and answers again rejoins (the session restarts
        from its checkpoint, the others skipping what they hold)."""
        if not self.several or time.monotonic() - self.checked < MEMBERSHIP_CHECK_SECS:
            return
        self.checked = time.monotonic()
        if any(lane.batch or not lane.settled for lane in self.lanes):
            return
        for lane_rt in self.rt.lanes:
            if self.report.target_states.get(lane_rt.name, "").startswith("down"):
                try:
                    lane_rt.sink
                except Exception:
                    lane_rt.reconnect_target()
                    continue
                log.info("target %s answers again: it catches up from its own checkpoint", lane_rt.name)
                raise Restart()

    def _drop_at_start(self, lane_rt: TaskRuntime, exc: Exception) -> None:
        """A target that cannot start applying: down, or waiting for its snapshot. Fatal unless the policy
        tolerates it."""
        waiting = isinstance(exc, PlanError)
        if not self.several or not (waiting or target_down(exc)) or not self.policy.tolerates(lane_rt.name):
            if self.several and isinstance(exc, CdcError):
                try:
                    named = type(exc)(f"target {lane_rt.name}: {exc.message}", exc.hint)
                except TypeError:
                    raise exc from None
                raise named from None
            raise exc
        self._record_out(lane_rt, ("waiting: " if waiting else "down: ") + one_line(exc))

    def _record_out(self, lane_rt: TaskRuntime, state: str) -> None:
        log.warning("target %s is not applying the log in this run (commit_policy %s goes on without it): %s",
                    lane_rt.name, self.policy.text, state)
        self.report.target_states[lane_rt.name] = state
        lane_rt.reconnect_target()

    def _policy_met(self) -> None:
        applying = {lane.rt.name for lane in self.lanes}
        if not self.policy.met(applying):
            states = "; ".join(f"{n}: {s}" for n, s in self.report.target_states.items())
            raise UnreachableError(f"commit_policy {self.policy.text} cannot be met: {self.policy.missing(applying)} "
                                   f"({states})", "bring the targets named back; the run retries them")

    def _drop_lost(self) -> None:
        """A lane whose checkpoint is before the oldest position the source still keeps cannot catch up from the
        log: fatal for a target the policy needs, dropped (and said) for one it tolerates."""
        positions = self.positions
        if len(self.lanes) < 2 or all(p == positions[0] for p in positions):
            return
        oldest = self.rt.log.earliest()
        for lane in list(self.lanes):
            if not is_before(lane.position, oldest):
                continue
            message = (f"target {lane.rt.name}'s checkpoint {lane.position} is before the oldest position the "
                       f"source keeps ({oldest}): its changes since are gone from the log")
            hint = (f"snapshot target {lane.rt.name} again: with the incremental launcher stopped, remove it from "
                    "targets, empty its tables, and add it back under a new name; it is snapshotted and joins the "
                    "log phase from its own low watermarks")
            if not self.policy.tolerates(lane.rt.name):
                raise PositionLost(message, hint)
            self.lanes.remove(lane)
            self._record_out(lane.rt, f"lost: {message}; {hint}")
            self._policy_met()

    @property
    def start(self) -> Position:
        return earliest(self.positions)
