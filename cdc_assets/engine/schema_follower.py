"""Which tables a lane applies, and with which definitions: where it starts, the tables added to or removed from
`source.tables` (engine/membership.py), and the schema changes met in the log (engine/schema_changes.py).

A change that gives the lane new definitions, or a table that finished its snapshot while the log was applied,
ends the session with `Restart`: the log is opened again from the checkpoint with the new schemas, or from the
joining table's start.
"""
from __future__ import annotations

import logging
import time

from cdc_assets.core.events import SchemaChange
from cdc_assets.core.positions import Position, earliest, is_before
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.engine.lane_checkpoint import LaneCheckpoint
from cdc_assets.engine.log_start import resolve_start
from cdc_assets.engine.membership import membership
from cdc_assets.engine.planning import describe
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.schema_changes import settle
from cdc_assets.errors import PositionLost

log = logging.getLogger("cdc_assets.incremental")
MEMBERSHIP_CHECK_SECS = 10.0  # how often a running session looks for added tables whose snapshot finished


class Restart(Exception):
    """Reopen the log: with new schemas (after an applied ADD COLUMN), for a table that joins, or for a target
    that answers again."""


class SchemaFollower:
    def __init__(self, rt: TaskRuntime) -> None:
        self.rt, self.pipeline = rt, rt.config.pipeline
        self.members_checked = time.monotonic()

    def start(self, report) -> tuple[LaneCheckpoint, dict[TableId, Position]]:
        """The lane's checkpoint and tables ahead: the resumer's, with the tables added and removed since; or,
        without a checkpoint, where `pipeline.startup_mode` starts (its schemas go with the first checkpoint)."""
        rt, resumer = self.rt, self.rt.resumer
        found = resumer.checkpoint()
        if found is not None:
            version = found.schema_version
            checkpoint = LaneCheckpoint(found.position, version, found.events,
                                        resumer.schemas(version) or self._describe())
            ahead = dict(found.ahead)
            if self.pipeline.startup_mode != "initial" and not report.start:
                log.info("a checkpoint exists: startup_mode %s is not used", self.pipeline.startup_mode)
            reason = self._follow_config(checkpoint, ahead, report, "checkpoint")
        else:
            position, reason = resolve_start(rt)
            schemas = self._describe()
            log.info("no checkpoint: starting at %s (%s)", position, reason)
            checkpoint = LaneCheckpoint(position, 0, 0, schemas, resumer.schema_records(0, schemas))
            ahead = {}
        if not report.start:
            report.start, report.start_reason = str(checkpoint.position), reason
        report.checkpoint, report.schema_version = checkpoint.position, checkpoint.version
        self.members_checked = time.monotonic()
        return checkpoint, ahead

    def follow(self, change: SchemaChange, checkpoint: LaneCheckpoint) -> bool:
        """Does `change` give the lane new definitions (a new schema version in `checkpoint`, which the lane
        checkpoints, then restarts with)? False: nothing the lane applies changed, it goes on. Raises when the
        change cannot be followed under `pipeline.schema_change_policy`."""
        table = change.table
        schema = settle(change, checkpoint.schemas.get(table), self.pipeline.schema_change_policy, self.rt.sink,
                        lambda t: describe(self.rt, t), self.rt.source.added_fill)
        if schema is None or schema == checkpoint.schemas.get(table):
            # the definitions the lane has (a PostgreSQL Relation of rows from before a change the lane already
            # followed with the catalog's newer definitions): a new version and a restart would meet it again
            return False
        checkpoint.new_version({**checkpoint.schemas, table: schema}, self.rt.resumer)
        return True

    def check_members(self, checkpoint: LaneCheckpoint) -> None:
        """Every MEMBERSHIP_CHECK_SECS, and only once the start is checkpointed: a table that finished its
        snapshot meanwhile restarts the session, to read the log again from its start."""
        if time.monotonic() - self.members_checked < MEMBERSHIP_CHECK_SECS or checkpoint.pending:
            return
        self.members_checked = time.monotonic()
        if membership(self.rt, checkpoint.schemas).joining:
            raise Restart()

    def _follow_config(self, checkpoint: LaneCheckpoint, ahead: dict[TableId, Position], report, reason: str) -> str:
        """Tables added to or removed from source.tables since the checkpoint's schema version: removed ones stop
        being applied, finished ones join from their own start (see engine/membership.py)."""
        rt = self.rt
        members = membership(rt, checkpoint.schemas)
        report.waiting = members.waiting
        for table in members.waiting:
            log.warning("not applied yet, waiting for its snapshot: %s", table)
        if not members.changed:
            return reason
        schemas = {t: s for t, s in checkpoint.schemas.items() if t not in members.removed}
        for table in members.removed:
            log.warning("%s was removed from source.tables: its changes are no longer applied (the target table is "
                        "left as it is) and its plan is dropped; adding it back snapshots it again", table)
            rt.plans.delete(table)
            ahead.pop(table, None)
        earliest_log = rt.log.earliest() if members.joining else None
        applied = {t: ahead.get(t, checkpoint.position) for t in schemas}
        for table, start in sorted(members.joining.items()):
            if is_before(start, earliest_log):
                raise PositionLost(
                    f"{table} joins the log phase from its snapshot's low watermark {start}, but the source keeps "
                    f"its log only from {earliest_log}", f"re-snapshot {table}: remove it from source.tables, run "
                    "one sync, add it back (it is planned and snapshotted again)")
            schemas[table] = describe(rt, table)
            applied[table] = start
            log.info("%s joins the log phase from %s, the minimum low watermark of its splits", table, start)
        checkpoint.position = earliest(list(applied.values())) if applied else checkpoint.position
        ahead.clear()
        ahead.update({t: p for t, p in applied.items() if is_before(checkpoint.position, p)})
        checkpoint.new_version(schemas, rt.resumer)
        report.joined += [str(t) for t in sorted(members.joining)]
        report.removed += [str(t) for t in members.removed]
        return f"{reason}; " + "; ".join(
            [f"{t} joins from {p}" for t, p in sorted(members.joining.items())]
            + [f"{t} removed" for t in members.removed])

    def _describe(self) -> dict[TableId, TableSchema]:
        return {t: describe(self.rt, t) for t in self.rt.config.source.table_ids}
