"""Plan time: every check that can refuse a task runs here, before any split is read."""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from cdc_assets.core.splits import SplitPlan
from cdc_assets.core.watermarks import ORDERED_KINDS
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.engine.columns import carried
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.target_down import one_line, target_down
from cdc_assets.errors import REPLAN_HINT, PlanError

log = logging.getLogger("cdc_assets.planning")


@dataclass(frozen=True)
class TablePlan:
    schema: TableSchema
    plan: SplitPlan
    created: bool  # False: an existing frozen plan was kept


def describe(rt: TaskRuntime, table: TableId) -> TableSchema:
    """The table's carried columns (engine/columns.py): the snapshot reads, and the log applies, only those."""
    schema = rt.source.describe(table, rt.config.source.split_columns.get(str(table)))
    return carried(schema, rt.config.source.exclude_columns.get(str(table), []))


def carried_now(rt: TaskRuntime, table: TableId) -> TableSchema:
    """`describe`, less the columns the log phase leaves out now (added under `ignore`, until a re-plan): what a
    split's read and its verification carry, so that they write and compare what the log applies."""
    schema = describe(rt, table)
    try:
        applied = _applied(rt).get(table)
    except Exception:  # noqa: BLE001 - a position store down: the read or the check then fails on its own
        log.debug("the applied definitions of %s could not be read", table, exc_info=True)
        return schema
    left_out = set(applied.excluded) - set(schema.excluded) if applied is not None else set()
    if not left_out:
        return schema
    return replace(schema, columns=tuple(c for c in schema.columns if c.name not in left_out),
                   excluded=schema.excluded + tuple(sorted(left_out)))


def ensure_plans(rt: TaskRuntime, replan: bool = False) -> list[TablePlan]:
    """Check source capture settings, tables, keys and the target; plan tables that have no plan yet. What
    the capture check reports (log retention, warnings) is left in `rt.capture_notes` for the plan output.

    An existing plan is kept as it is (plans are frozen); `replan=True` discards plans *and* positions,
    because finished markers of an old plan say nothing about a new plan's splits.
    """
    rt.capture_notes = rt.source.check_capture()
    for note in rt.capture_notes:
        log.info("%s", note)
    schemas = [describe(rt, t) for t in rt.config.source.table_ids]
    rt.log.prepare(rt.config.source.table_ids, replan)  # before any low watermark: the log from there on is kept
    planned_at = None  # taken once, and only when a table needs a plan
    for lane in rt.lanes:
        try:
            applied = {} if replan else _applied(lane)
            for schema in schemas:
                lane.sink.ensure_table(applied.get(schema.table, schema), follow=replan)
        except Exception as exc:  # a target the policy may do without: its tables are made at its snapshot
            if len(rt.lanes) == 1 or not (rt.policy.tolerates(lane.name) and target_down(exc)):
                raise
            log.warning("target %s is down; its tables are created when its splits are snapshotted: %s",
                        lane.name, one_line(exc))
            lane.reconnect_target()
    if replan:
        for schema in schemas:
            rt.plans.delete(schema.table)
        for lane in rt.lanes:
            lane.resumer.clear()
    _drop_abandoned_plans(rt)
    out = []
    for schema in schemas:
        existing = rt.plans.load(schema.table)
        if existing is not None:
            if existing.split_column != schema.split_column.name:
                raise PlanError(
                    f"the plan of {schema.table} splits on '{existing.split_column}' but the table now splits on "
                    f"'{schema.split_column.name}'", REPLAN_HINT)
            if (note := _split_size_note(existing, rt.config.snapshot.split_size)) is not None:
                log.warning("%s", note)
                rt.capture_notes.append(note)
            out.append(TablePlan(schema, existing, created=False))
            continue
        if planned_at is None:
            planned_at = rt.source.current_position().to_json()
        split_size = rt.config.snapshot.split_size
        plan = replace(rt.source.plan(schema, split_size), planned_at=planned_at, split_size=split_size)
        if rt.config.pipeline.exactly_once and plan.key_kind not in ORDERED_KINDS:
            raise PlanError(
                f"exactly_once needs {schema.table} to split on an integer or decimal column; it splits on "
                f"'{plan.split_column}' ({plan.key_kind}), whose order in the source's collation this process "
                "cannot reproduce", "set pipeline.exactly_once: false (at-least-once, exact final state), or "
                "configure source.split_columns with an integer column")
        rt.plans.save(plan)
        out.append(TablePlan(schema, plan, created=True))
    return out


def _applied(lane: TaskRuntime) -> dict[TableId, TableSchema]:
    """The definitions the lane's log phase applies now (columns left out under `ignore` are not among them):
    what its target tables must hold, rather than every column the source has."""
    checkpoint = lane.resumer.checkpoint()
    return (lane.resumer.schemas(checkpoint.schema_version) or {}) if checkpoint else {}


def _split_size_note(plan: SplitPlan, split_size: int) -> str | None:
    """One line when snapshot.split_size changed since `plan` was made: the frozen plan is kept, which a changed
    setting would otherwise leave unsaid."""
    if plan.split_size is None or plan.split_size == split_size:
        return None
    return (f"{plan.table}: snapshot.split_size is {split_size} but its plan {plan.plan_id} was made with "
            f"{plan.split_size}: the plan is kept ({len(plan.splits)} splits); to split anew, re-plan: "
            "cdc-assets plan --replan (every split of the task is read again)")


def plan_unplanned(rt: TaskRuntime) -> list[SplitPlan]:
    """The plans of the configured tables, planning only when one has no plan yet (the planner sensor's tick).

    Plans are frozen, so once every table has one there is nothing to check or plan: no database is touched
    (no capture check, describe or publication change every tick). A table added to the config runs every check
    of `ensure_plans`. A plan of a table that left the config is dropped as `ensure_plans` would drop it."""
    configured = rt.config.source.table_ids
    if any(rt.plans.load(t) is None for t in configured):
        return [tp.plan for tp in ensure_plans(rt)]
    if any(p.table not in configured for p in rt.plans.all()):
        _drop_abandoned_plans(rt)
    return list(load_plans(rt).values())


def _drop_abandoned_plans(rt: TaskRuntime) -> None:
    """Plans of tables that left the config before the log phase applied them: nothing will snapshot them, and
    a plan that never joins would hold the PostgreSQL slot's acknowledgement back (membership.release_bound).
    Tables the log phase applies are left to it: it stops applying them and drops their plans itself."""
    configured = set(rt.config.source.table_ids)
    checkpoint = rt.resumer.checkpoint()
    applied = (rt.resumer.schemas(checkpoint.schema_version) or {}) if checkpoint else {}
    for plan in rt.plans.all():
        if plan.table not in configured and plan.table not in applied:
            log.info("%s is no longer in source.tables: its plan %s is dropped", plan.table, plan.plan_id)
            rt.plans.delete(plan.table)


def load_plans(rt: TaskRuntime) -> dict[TableId, SplitPlan]:
    """Plans that exist now, without touching any database."""
    return {t: p for t in rt.config.source.table_ids if (p := rt.plans.load(t)) is not None}
