"""One target's savepoints: create, roll back, delete and recover on one lane's runtime, under the task's lease
that the caller (engine/savepoints.py) holds.

Everything is keyed by the lane's `position_key` (the task's id for the first target, `<task>.<target>` for the
others), never by the task's id alone: its savepoint records and rollback intent (`cdc_assets_meta` in its
target), its before-image tables (named from the key), its checkpoint in the position store (sqlite and
`from_db` hold every target's), and its PostgreSQL savepoint slots (the source's server holds the slots of every
target). A one-target task keeps the keys it had before it could have several.

A rollback writes its intent (`savepoint_rollbacks`) in the target before it starts, its commit mark in the
target transaction that restores the tables, and clears it after the checkpoint reached the position store.
`recover` finishes a rollback killed after its commit (the checkpoint still to write) and forgets one killed
before it (nothing was rolled back; only a PostgreSQL task slot the rollback moved may need putting back).
"""
from __future__ import annotations

import logging
import time

from cdc_assets.core.positions import position_from_json
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.engine.faults import crash_point
from cdc_assets.engine.registry import savepoint_log
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.savepoint_values import Savepoint, SavepointError, SavepointReport
from cdc_assets.errors import CdcError
from cdc_assets.resumer.records import CDC_DOING, CHECKPOINT_KEY, ROLLBACK_MARK, PositionRecord, now_text
from cdc_assets.sinks.before_images import BeforeImages

log = logging.getLogger("cdc_assets.savepoints")
STARTED, COMMITTED = "started", "committed"


def whose(lane: TaskRuntime) -> str:
    """How messages name the lane: the task, or with several targets the target of the task."""
    task = lane.config.task_id
    return f"target {lane.name} of task {task}" if len(lane.lanes) > 1 else f"task {task}"


def _log_tag(lane: TaskRuntime):
    source = lane.config.source
    return savepoint_log(source.db_type)(source.db_url, lane.config.task_id, lane.position_key, lane.log)


def list_savepoints(lane: TaskRuntime) -> list[Savepoint]:
    images = BeforeImages(lane.sink)
    if not images.exists():
        return []
    with lane.sink.catalog() as cur:
        return [Savepoint.of(r) for r in images.savepoints(cur, lane.position_key)]


def find(lane: TaskRuntime, name: str) -> tuple[Savepoint, list[Savepoint]]:
    """Savepoint `name` and every savepoint of the lane, oldest first; SavepointError when it has none so named."""
    every = list_savepoints(lane)
    for sp in every:
        if sp.name == name:
            return sp, every
    known = ", ".join(s.name for s in every) or "none"
    raise SavepointError(f"{whose(lane)} has no savepoint {name!r} (savepoints: {known})",
                         "list them with `cdc-assets savepoint list`")


def _checkpoint_record(lane: TaskRuntime) -> PositionRecord | None:
    [record] = lane.resumer.store.load(lane.position_key, CDC_DOING, [CHECKPOINT_KEY]) or [None]
    return record


def _fingerprint(finished: dict) -> str:
    return f"{finished.get('plan_id')}|{finished.get('high_watermark')}"


def _finished(lane: TaskRuntime, plan_ids) -> dict[str, str]:
    return {k: _fingerprint(r.position_data) for k, r in lane.resumer.finished().items()
            if r.position_data.get("plan_id") in plan_ids}


def _state(checkpoint: dict) -> dict:
    """What a checkpoint record says of its target's state: a rollback's mark aside (back at a savepoint, the
    target is in the state the savepoint tagged)."""
    return {k: v for k, v in checkpoint.items() if k != ROLLBACK_MARK}


def create_check(lane: TaskRuntime, name: str) -> Savepoint | None:
    """Can the lane take savepoint `name` now? The one it has already when it tags this very state (a create
    killed after this target: running it again keeps it), None when it has none; SavepointError otherwise."""
    record = _checkpoint_record(lane)
    if record is None:
        raise SavepointError(f"{whose(lane)} has no checkpoint yet: a savepoint tags a state the log phase can "
                             "resume from", "finish the snapshot and run `cdc-assets sync --until-caught-up` first")
    there = next((sp for sp in list_savepoints(lane) if sp.name == name), None)
    if there is None or _state(there.checkpoint) == _state(record.position_data):
        return there
    only = f" --target {lane.name}" if len(lane.lanes) > 1 else ""
    raise SavepointError(f"{whose(lane)} already has a savepoint {name!r}, of an earlier state ({there.position}; "
                         f"the checkpoint is at {position_from_json(record.position_data)} now)",
                         f"pick another name, or `cdc-assets savepoint delete {name}{only}` first")


def create(lane: TaskRuntime, name: str) -> SavepointReport:
    """Tag the lane's target tables and checkpoint as `name`: no table is copied."""
    started = time.monotonic()
    target = lane.name if len(lane.lanes) > 1 else None
    there = create_check(lane, name)
    if there is not None:
        return SavepointReport(name, there, time.monotonic() - started, "kept (there already at this state)", target)
    key, record = lane.position_key, _checkpoint_record(lane)
    images = BeforeImages(lane.sink)
    images.ensure_meta()
    version = int(record.position_data.get("schema_version", 0))
    schemas = lane.resumer.schemas(version) or {}
    for schema in schemas.values():
        images.ensure_shadow(key, schema)
    plans = {str(p.table): p.plan_id for p in lane.plans.all()}
    position = position_from_json(record.position_data)
    tag = _log_tag(lane)
    log_tag = tag.create(name, position)
    try:
        with lane.sink.transaction() as cur:
            newest = images.newest_epoch(cur, key)
            sp = Savepoint(name, (newest or 0) + 1, now_text(), dict(record.position_data), plans,
                           _finished(lane, plans.values()), sorted(str(t) for t in schemas), log_tag)
            images.insert_savepoint(cur, key, sp.row())
    except BaseException:
        tag.drop(log_tag)
        raise
    return SavepointReport(name, sp, time.monotonic() - started, "created", target)


def refusals(lane: TaskRuntime, sp: Savepoint) -> list[str]:
    """Why the lane cannot go back to `sp`: the plan or its finished splits changed, or the schema version."""
    why = []
    now = {str(p.table): p.plan_id for p in lane.plans.all()}
    for table, plan_id in sorted(sp.plans.items()):
        if now.get(table) != plan_id:
            why.append(f"the plan of {table} changed since the savepoint ({plan_id} then, {now.get(table) or 'none'} "
                       "now: re-planned or removed)")
    for table in sorted(set(now) - set(sp.plans)):
        why.append(f"{table} was planned after the savepoint")
    finished = _finished(lane, now.values())
    changed = sorted(k for k in set(finished) | set(sp.finished) if finished.get(k) != sp.finished.get(k))
    if changed and not why:
        why.append(f"splits were snapshotted again since the savepoint: {', '.join(changed[:5])}"
                   + (f" and {len(changed) - 5} more" if len(changed) > 5 else ""))
    record = _checkpoint_record(lane)
    version = int(record.position_data.get("schema_version", 0)) if record else None
    if version != sp.schema_version:
        why.append(f"the schema version changed since the savepoint ({sp.schema_version} then, {version} now: DDL was "
                   "applied, or tables joined or left the log phase), which a rollback cannot undo")
    return why


def check_log(lane: TaskRuntime, sp: Savepoint) -> None:
    """Refuse (the source's own CdcError, naming the target when there are several) when the log no longer
    reaches `sp`: binlog files purged, the savepoint's slot gone or invalidated."""
    try:
        _log_tag(lane).check(sp.name, sp.log_tag, sp.position)
    except CdcError as exc:
        if len(lane.lanes) == 1:
            raise
        raise SavepointError(f"target {lane.name}: {exc.message}", exc.hint.replace(
            f"savepoint delete {sp.name}", f"savepoint delete {sp.name} --target {lane.name}")) from None


def rollback(lane: TaskRuntime, sp: Savepoint, every: list[Savepoint]) -> SavepointReport:
    """Restore the lane's target tables and checkpoint to `sp` (found with `find`, no `refusals`, `check_log`
    passed), in one target transaction."""
    started = time.monotonic()
    key = lane.position_key
    later = [s for s in every if s.epoch > sp.epoch]
    images = BeforeImages(lane.sink)
    data = {**sp.checkpoint, ROLLBACK_MARK: f"{sp.name}@{now_text()}"}
    checkpoint = PositionRecord(key, CDC_DOING, CHECKPOINT_KEY, data)
    intent = {"checkpoint": data, "log_tag": sp.log_tag, "drop_tags": [s.log_tag for s in later]}
    with lane.sink.transaction() as cur:
        images.set_pending(cur, key, sp.name, STARTED, intent)
    crash_point("savepoint.rollback_intent")
    try:
        restored = _restore(lane, images, sp, later, checkpoint, intent)
    except Exception:
        recover(lane)  # nothing committed: put the slot back if it went, and forget the intent
        raise
    crash_point("savepoint.rollback_committed")
    _finish(lane, images, intent)
    return SavepointReport(sp.name, sp, time.monotonic() - started, "rolled back to",
                           lane.name if len(lane.lanes) > 1 else None, restored, [s.name for s in later])


def _restore(lane: TaskRuntime, images: BeforeImages, sp: Savepoint, later: list[Savepoint],
             checkpoint: PositionRecord, intent: dict) -> dict[str, int]:
    """The log's hold, then the one target transaction: images back, later savepoints and their images gone,
    the checkpoint (from_target) and the intent's commit mark."""
    key = lane.position_key
    _log_tag(lane).restore(sp.log_tag)
    crash_point("savepoint.rollback_slot")
    schemas = lane.resumer.schemas(sp.schema_version) or {}
    restored: dict[str, int] = {}
    lane.sink.move_marks.ensure()  # the tables go back to before their later moves: their marks go (DDL first)
    with lane.sink.transaction() as cur:
        for table in sorted(schemas):
            lane.sink.move_marks.clear(cur, table)
            columns = images.shadow_columns(key, table)
            if columns:
                restored[str(table)] = images.restore(cur, key, schemas[table], columns, sp.epoch)
            crash_point("savepoint.rollback_table")
        images.delete_savepoints(cur, key, [s.name for s in later])
        if lane.resumer.writes_in_target:
            lane.resumer.write_in(cur, [checkpoint])
        images.set_pending(cur, key, sp.name, COMMITTED, intent)
        crash_point("savepoint.rollback_before_commit")
    return restored


def _finish(lane: TaskRuntime, images: BeforeImages, intent: dict) -> None:
    """After the rollback's commit: the checkpoint where the position store is not the target, the log tags of
    the dropped savepoints, then the intent."""
    key = lane.position_key
    lane.resumer.record_committed([PositionRecord(key, CDC_DOING, CHECKPOINT_KEY, intent["checkpoint"])])
    crash_point("savepoint.rollback_positions_written")
    tag = _log_tag(lane)
    for dropped in intent.get("drop_tags", []):
        tag.drop(dropped)
    with lane.sink.transaction() as cur:
        images.clear_pending(cur, key)


def recover(lane: TaskRuntime) -> str | None:
    """Finish what a killed rollback left on the lane: its positions when its target transaction committed; when
    it did not, nothing was rolled back (only the PostgreSQL slot may have been moved back or be missing: put
    back). Runs under the task's lease, before anything reads the lane's checkpoint."""
    images = BeforeImages(lane.sink)
    if not images.exists():
        return None
    key = lane.position_key
    with lane.sink.catalog() as cur:
        pending = images.pending(cur, key)
    if pending is None:
        return None
    name, state, intent = pending
    if state == COMMITTED:
        log.warning("%s: completing the rollback to savepoint %s that was interrupted after its commit: writing its "
                    "checkpoint to %s", whose(lane), name, lane.resumer.store.describe())
        _finish(lane, images, intent)
        return f"completed the interrupted rollback to savepoint {name}"
    log.warning("%s: the rollback to savepoint %s was interrupted before its commit: nothing was rolled back; run it "
                "again to roll back", whose(lane), name)
    _log_tag(lane).repair(intent["log_tag"])
    with lane.sink.transaction() as cur:
        images.clear_pending(cur, key)
    return f"the interrupted rollback to savepoint {name} did not commit: nothing was rolled back"


def delete(lane: TaskRuntime, sp: Savepoint, every: list[Savepoint]) -> SavepointReport:
    """Drop savepoint `sp` (found with `find`); its before-images go unless an older savepoint still needs them."""
    started = time.monotonic()
    key = lane.position_key
    images = BeforeImages(lane.sink)
    older = [s for s in every if s.epoch < sp.epoch]
    newer = [s for s in every if s.epoch > sp.epoch]
    tables = [TableId.parse(t) for t in sorted({t for s in every for t in s.tables})]
    schemas = lane.resumer.schemas(sp.schema_version) or {}
    with lane.sink.transaction() as cur:
        for table in tables:
            columns = images.shadow_columns(key, table)
            if not columns:
                continue
            if older:
                schema = schemas.get(table) or _schema_of(lane, table)
                images.merge_epoch(cur, key, table, schema.primary_key, columns, sp.epoch, older[-1].epoch)
            elif newer:
                images.drop_epochs(cur, key, table, newer[0].epoch)
        images.delete_savepoints(cur, key, [sp.name])
    _log_tag(lane).drop(sp.log_tag)
    if not older and not newer:
        for table in tables:
            images.drop_shadow(key, table)
    return SavepointReport(sp.name, sp, time.monotonic() - started, "deleted",
                           lane.name if len(lane.lanes) > 1 else None)


def _schema_of(lane: TaskRuntime, table: TableId) -> TableSchema:
    record = _checkpoint_record(lane)
    version = int(record.position_data.get("schema_version", 0)) if record else 0
    return (lane.resumer.schemas(version) or {})[table]


def storage(lane: TaskRuntime) -> dict[str, int]:
    """Before-images the lane's target holds per table (what its savepoints cost there)."""
    images = BeforeImages(lane.sink)
    if not images.exists():
        return {}
    key = lane.position_key
    tables = {t for sp in list_savepoints(lane) for t in sp.tables}
    with lane.sink.catalog() as cur:
        return {t: images.image_count(cur, key, TableId.parse(t)) for t in sorted(tables)
                if images.shadow_columns(key, TableId.parse(t))}
