"""Where the incremental phase starts when no checkpoint exists, the split watermarks it filters with, and the
source's capture settings checked again at each start."""
from __future__ import annotations

from datetime import timezone
from typing import Callable

from cdc_assets.core.positions import MysqlPosition, PgPosition, Position, earliest, latest, position_from_json
from cdc_assets.core.tables import TableId
from cdc_assets.core.watermarks import TableWatermarks
from cdc_assets.engine.planning import load_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.target_down import answering
from cdc_assets.errors import PlanError, SourceSetupError

SNAPSHOT_HINT = "run `cdc-assets snapshot`, or materialize the missing partitions in Dagster"
CAPTURE_HINT = ("change those settings on the source (globally, and in its config so that a restart keeps them; "
                "SET PERSIST on MySQL 8), then run the sync again; a change a session logged meanwhile as an SQL "
                "statement stops the sync, naming the table to re-snapshot")


def check_capture(rt: TaskRuntime) -> None:
    """Refuse to start the log phase on settings the plan would refuse: one changed since (SET GLOBAL
    binlog_format=STATEMENT) loses changes without a word."""
    try:
        rt.source.check_capture()
    except SourceSetupError as exc:
        raise SourceSetupError(f"the sync cannot start: {exc.message}", CAPTURE_HINT) from None


def snapshot_progress(rt: TaskRuntime) -> list[tuple[TableId, int, int]]:
    """(table, finished splits, splits) per configured table; 0 splits when the table has no plan yet."""
    finished = rt.resumer.finished()
    return _progress(rt, lambda split_id, plan_id: _of_plan(finished, split_id, plan_id))


def task_progress(rt: TaskRuntime) -> list[tuple[TableId, int, int]]:
    """As `snapshot_progress`, a split counting as finished where `pipeline.commit_policy` is met for it."""
    if len(rt.lanes) == 1:
        return snapshot_progress(rt)
    finished, _ = answering(rt.lanes, lambda lane: lane.resumer.finished())  # a target that is down has none
    return _progress(rt, lambda split_id, plan_id: rt.policy.met(
        {n for n, f in finished.items() if _of_plan(f, split_id, plan_id)}))


def _progress(rt: TaskRuntime, done: Callable[[str, str], bool]) -> list[tuple[TableId, int, int]]:
    plans = load_plans(rt)
    out = []
    for table in rt.config.source.table_ids:
        plan = plans.get(table)
        splits = plan.splits if plan else []
        out.append((table, sum(1 for s in splits if done(s.id, plan.plan_id)), len(splits)))
    return out


def _of_plan(finished: dict, split_id: str, plan_id: str) -> bool:
    return split_id in finished and finished[split_id].position_data.get("plan_id") == plan_id


def unfinished_reason(progress: list[tuple[TableId, int, int]]) -> str | None:
    """"3/12 splits of shop.orders finished", for each table still waiting; None when every split finished."""
    waiting = [f"{done}/{total} splits of {t} finished" if total else f"{t} is not planned yet"
               for t, done, total in progress if total == 0 or done < total]
    return "; ".join(waiting) or None


def resolve_start(rt: TaskRuntime) -> tuple[Position, str]:
    pipeline = rt.config.pipeline
    mode = pipeline.startup_mode
    if mode == "initial":
        reason = unfinished_reason(snapshot_progress(rt))
        if reason:
            raise PlanError(f"the snapshot is not finished: {reason}", SNAPSHOT_HINT)
        lows = [position_from_json(r.position_data["low_watermark"]) for r in finished_of_plans(rt)]
        return earliest(lows), f"initial: the minimum low watermark over {len(lows)} splits"
    rt.log.prepare(rt.config.source.table_ids)  # a PostgreSQL slot from now on, if planning did not make it
    if mode == "latest":
        return rt.source.current_position(), "latest: the source's log end"
    if mode == "earliest":
        return rt.log.earliest(), "earliest: the oldest position the source still has"
    if mode == "timestamp":
        when = pipeline.start_timestamp
        when = when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when
        return rt.log.position_at(when), f"timestamp: the first transaction at or after {when.isoformat()}"
    p = pipeline.start_position
    position = PgPosition.parse_lsn(p.lsn) if p.lsn else MysqlPosition(p.binlog_filename, p.next_event_position, p.gtid_set)
    return position, "position: given in pipeline.start_position"


def finished_of_plans(rt: TaskRuntime):
    plans = load_plans(rt)
    ids = {p.plan_id for p in plans.values()}
    return [r for r in rt.resumer.finished().values() if r.position_data.get("plan_id") in ids]


def split_watermarks(rt: TaskRuntime) -> dict[TableId, TableWatermarks]:
    """Per table, each split's high watermark: what the exactly-once filter skips."""
    highs: dict[TableId, dict[int, Position]] = {}
    for r in finished_of_plans(rt):
        d = r.position_data
        table = TableId(d["schema"], d["tb"])
        highs.setdefault(table, {})[int(r.position_key.rpartition(":")[2])] = position_from_json(d["high_watermark"])
    plans = load_plans(rt)
    return {t: TableWatermarks(plans[t], h) for t, h in highs.items()
            if t in plans and len(h) == len(plans[t].estimated_rows)}


def snapshot_horizons(rt: TaskRuntime) -> dict[TableId, Position]:
    """Per table, the largest high watermark of its finished splits: up to there the log may replay changes the
    snapshot already read."""
    highs: dict[TableId, list[Position]] = {}
    for r in finished_of_plans(rt):
        d = r.position_data
        highs.setdefault(TableId(d["schema"], d["tb"]), []).append(position_from_json(d["high_watermark"]))
    return {t: latest(h) for t, h in highs.items()}
