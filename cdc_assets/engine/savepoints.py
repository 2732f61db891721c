"""Savepoints: a named tag of the target tables' state and the task's positions, and the rollback to it.

A savepoint is one row in the target (`cdc_assets_meta.savepoints`), committed in one target transaction: the
checkpoint record as it stands, its schema version, the plan ids, the finished splits, and an *epoch*. Nothing
is copied: from then on every log batch writes, in its own target transaction and before it changes anything,
the before-images of the keys it touches (sinks/before_images.py). Rolling back puts each imaged key back as its
oldest image since the savepoint and writes the savepoint's checkpoint, in one target transaction; a `sync` then
replays the log from there. The log must still reach that position: a MySQL binlog is checked against the oldest
file; a PostgreSQL savepoint holds a slot of its own (sources/postgres/savepoint_slots.py).

Where positions live outside the target (sqlite, from_db, from_log), the rollback's transaction also records its
intent with the checkpoint to write (`savepoint_rollbacks`); the position store is written after the commit and
the intent cleared after that. A crash in between is redone by `recover`, which every sync and savepoint command
runs first under the task's lease, so nothing reads the old checkpoint against the rolled-back target.

The *task lease* (an flock on a file in the task's data_dir: engine/task_lock.py) keeps syncs and savepoint commands of one task apart: a
savepoint taken while a batch commits, or a rollback under a running sync, would tag or restore a state no
checkpoint describes.
"""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field


from cdc_assets.core.batches import TableChanges
from cdc_assets.core.positions import Position, position_from_json
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.engine.faults import crash_point
from cdc_assets.engine.registry import savepoint_log
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.task_lock import task_lease as lease
from cdc_assets.errors import CdcError
from cdc_assets.resumer.records import CDC_DOING, CHECKPOINT_KEY, PositionRecord, now_text
from cdc_assets.sinks.before_images import BeforeImages, SavepointRow

log = logging.getLogger("cdc_assets.savepoints")
LEASE_WAIT_SECS = 600.0  # a sync's runs are bounded; a rollback takes seconds
STARTED, COMMITTED = "started", "committed"
ROLLBACK_MARK = "rolled_back_to"  # in a checkpoint a rollback wrote: which savepoint, when
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class SavepointError(CdcError):
    """A savepoint that cannot be created, rolled back to or deleted; the message says why (an unknown name, a plan
    or schema changed since, the log no longer reaching it). Way out: the hint (docs/operations/savepoints.md)."""


@dataclass(frozen=True)
class Savepoint:
    name: str
    epoch: int
    created_at: str
    checkpoint: dict  # the CdcDoing record's data
    plans: dict[str, str]  # table -> plan id
    finished: dict[str, str]  # split id -> its high watermark (JSON text)
    tables: list[str]
    log_tag: dict

    @property
    def position(self) -> Position:
        return position_from_json(self.checkpoint)

    @property
    def schema_version(self) -> int:
        return int(self.checkpoint.get("schema_version", 0))

    @staticmethod
    def of(row: SavepointRow) -> "Savepoint":
        d = row.data
        return Savepoint(row.name, row.epoch, row.created_at, d["checkpoint"], d["plans"], d["finished"],
                         d["tables"], d.get("log_tag", {}))

    def row(self) -> SavepointRow:
        return SavepointRow(self.name, self.epoch, self.created_at, {
            "checkpoint": self.checkpoint, "plans": self.plans, "finished": self.finished, "tables": self.tables,
            "log_tag": self.log_tag})

    def line(self) -> str:
        return (f"{self.name}: epoch {self.epoch}, created {self.created_at} UTC at {self.position} (schema version "
                f"{self.schema_version}), {len(self.tables)} tables")


@dataclass
class SavepointReport:
    savepoint: Savepoint
    seconds: float
    action: str
    restored: dict[str, int] = field(default_factory=dict)  # rollback: keys put back per table
    dropped: list[str] = field(default_factory=list)  # rollback: later savepoints dropped

    def lines(self) -> list[str]:
        out = [f"{self.action} savepoint {self.savepoint.line()} in {self.seconds:.3f} s"]
        if self.restored:
            out.append("keys restored: " + ", ".join(f"{t}: {n}" for t, n in sorted(self.restored.items())))
        if self.dropped:
            out.append(f"later savepoints dropped (their state is gone): {', '.join(self.dropped)}")
        return out


# -- the task lease -------------------------------------------------------------------------------------------


def task_lease(rt: TaskRuntime, wait: float = LEASE_WAIT_SECS, doing: str = "this command"):
    """Syncs and savepoint commands of one task run one at a time (engine/task_lock.py)."""
    return lease(rt.config, doing, owner=rt, wait=wait)


# -- before-images written by the log phase -------------------------------------------------------------------


class ImageWriter:
    """The log phase's side: before a batch changes the target, its keys' images, while a savepoint exists.
    Looked up per batch inside the batch's transaction, so a savepoint counts from the first batch after it."""

    def __init__(self, rt: TaskRuntime) -> None:
        self.rt = rt
        self.images = BeforeImages(rt.sink)
        self.active = self.images.exists()  # no savepoint was ever taken: not even the lookup
        self._columns: dict[TableId, list[str]] = {}

    def capture(self, cursor, schemas: dict[TableId, TableSchema], net: dict[TableId, TableChanges]) -> None:
        if not self.active or not net:
            return
        task = self.rt.config.task_id
        epoch = self.images.newest_epoch(cursor, task)
        if epoch is None:
            return
        for table, changes in net.items():
            columns = self._columns.get(table)
            if columns is None:
                columns = self._columns[table] = self.images.shadow_columns(task, table)
            if columns:
                keys = [*changes.deletes, *changes.rows, *changes.partial, *changes.moves]
                self.images.capture(cursor, task, schemas[table], columns, keys, epoch)


# -- commands -------------------------------------------------------------------------------------------------


def _log_tag(rt: TaskRuntime):
    return savepoint_log(rt.config.source.db_type)(rt.config.source.db_url, rt.config.task_id, rt.log)


def list_savepoints(rt: TaskRuntime) -> list[Savepoint]:
    images = BeforeImages(rt.sink)
    if not images.exists():
        return []
    with rt.sink.catalog() as cur:
        return [Savepoint.of(r) for r in images.savepoints(cur, rt.config.task_id)]


def _find(rt: TaskRuntime, name: str) -> tuple[Savepoint, list[Savepoint]]:
    every = list_savepoints(rt)
    for sp in every:
        if sp.name == name:
            return sp, every
    known = ", ".join(s.name for s in every) or "none"
    raise SavepointError(f"task {rt.config.task_id} has no savepoint {name!r} (savepoints: {known})",
                         "list them with `cdc-assets savepoint list`")


def _checkpoint_record(rt: TaskRuntime) -> PositionRecord | None:
    [record] = rt.resumer.store.load(rt.config.task_id, CDC_DOING, [CHECKPOINT_KEY]) or [None]
    return record


def create(rt: TaskRuntime, name: str) -> SavepointReport:
    """Tag the target tables' state and the task's positions as `name`: no table is copied."""
    rt.one_target("a savepoint")
    if not _NAME.match(name or ""):
        raise SavepointError(f"savepoint name {name!r} is not allowed",
                             "use 1-100 letters, digits, '_', '.', '-', starting with a letter or digit")
    started = time.monotonic()
    task = rt.config.task_id
    with task_lease(rt, doing=f"savepoint create {name}"):
        recover(rt)
        record = _checkpoint_record(rt)
        if record is None:
            raise SavepointError(f"task {task} has no checkpoint yet: a savepoint tags a state the log phase can "
                                 "resume from", "finish the snapshot and run `cdc-assets sync --until-caught-up` first")
        images = BeforeImages(rt.sink)
        images.ensure_meta()
        if any(sp.name == name for sp in list_savepoints(rt)):
            raise SavepointError(f"task {task} already has a savepoint {name!r}",
                                 f"pick another name, or `cdc-assets savepoint delete {name}` first")
        version = int(record.position_data.get("schema_version", 0))
        schemas = rt.resumer.schemas(version) or {}
        for schema in schemas.values():
            images.ensure_shadow(task, schema)
        plans = {str(p.table): p.plan_id for p in rt.plans.all()}
        finished = {k: _fingerprint(r.position_data) for k, r in rt.resumer.finished().items()
                    if r.position_data.get("plan_id") in plans.values()}
        position = position_from_json(record.position_data)
        tag = _log_tag(rt)
        log_tag = tag.create(name, position)
        try:
            with rt.sink.transaction() as cur:
                newest = images.newest_epoch(cur, task)
                sp = Savepoint(name, (newest or 0) + 1, now_text(), dict(record.position_data), plans, finished,
                               sorted(str(t) for t in schemas), log_tag)
                images.insert_savepoint(cur, task, sp.row())
        except BaseException:
            tag.drop(log_tag)
            raise
    return SavepointReport(sp, time.monotonic() - started, "created")


def rollback_mark(rt: TaskRuntime) -> str:
    """"~<savepoint>@<time>" when the checkpoint is one a rollback wrote, else "": tells the run started after a
    rollback from the one started earlier at the same position."""
    record = _checkpoint_record(rt)
    mark = record.position_data.get(ROLLBACK_MARK) if record else None
    return f"~{mark}" if mark else ""


def _fingerprint(finished: dict) -> str:
    return f"{finished.get('plan_id')}|{finished.get('high_watermark')}"


def _refusals(rt: TaskRuntime, sp: Savepoint) -> list[str]:
    """Why the task cannot go back to `sp`: the plan or the finished splits changed, or the schema version."""
    why = []
    now = {str(p.table): p.plan_id for p in rt.plans.all()}
    for table, plan_id in sorted(sp.plans.items()):
        if now.get(table) != plan_id:
            why.append(f"the plan of {table} changed since the savepoint ({plan_id} then, {now.get(table) or 'none'} "
                       "now: re-planned or removed)")
    for table in sorted(set(now) - set(sp.plans)):
        why.append(f"{table} was planned after the savepoint")
    finished = {k: _fingerprint(r.position_data) for k, r in rt.resumer.finished().items()
                if r.position_data.get("plan_id") in now.values()}
    changed = sorted(k for k in set(finished) | set(sp.finished) if finished.get(k) != sp.finished.get(k))
    if changed and not why:
        why.append(f"splits were snapshotted again since the savepoint: {', '.join(changed[:5])}"
                   + (f" and {len(changed) - 5} more" if len(changed) > 5 else ""))
    record = _checkpoint_record(rt)
    version = int(record.position_data.get("schema_version", 0)) if record else None
    if version != sp.schema_version:
        why.append(f"the schema version changed since the savepoint ({sp.schema_version} then, {version} now: DDL was "
                   "applied, or tables joined or left the log phase), which a rollback cannot undo")
    return why


def rollback(rt: TaskRuntime, name: str) -> SavepointReport:
    """Restore the target tables and the checkpoint to savepoint `name`, in one target transaction."""
    rt.one_target("a savepoint rollback")
    started = time.monotonic()
    task = rt.config.task_id
    with task_lease(rt, doing=f"savepoint rollback {name}"):
        recover(rt)
        sp, every = _find(rt, name)
        why = _refusals(rt, sp)
        if why:
            raise SavepointError(f"cannot roll back task {task} to savepoint {name}: " + "; ".join(why),
                                 f"delete the savepoint (cdc-assets savepoint delete {name}); savepoints taken after "
                                 "the change can be rolled back to")
        tag = _log_tag(rt)
        tag.check(name, sp.log_tag, sp.position)
        later = [s for s in every if s.epoch > sp.epoch]
        images = BeforeImages(rt.sink)
        data = {**sp.checkpoint, ROLLBACK_MARK: f"{name}@{now_text()}"}
        checkpoint = PositionRecord(task, CDC_DOING, CHECKPOINT_KEY, data)
        intent = {"checkpoint": data, "log_tag": sp.log_tag,
                  "drop_tags": [s.log_tag for s in later]}
        with rt.sink.transaction() as cur:
            images.set_pending(cur, task, name, STARTED, intent)
        crash_point("savepoint.rollback_intent")
        try:
            restored = _restore(rt, images, tag, sp, later, checkpoint, intent)
        except Exception:
            recover(rt)  # nothing committed: put the slot back if it went, and forget the intent
            raise
        crash_point("savepoint.rollback_committed")
        _finish(rt, images, intent)
    return SavepointReport(sp, time.monotonic() - started, "rolled back to", restored, [s.name for s in later])


def _restore(rt: TaskRuntime, images: BeforeImages, tag, sp: Savepoint, later: list[Savepoint],
             checkpoint: PositionRecord, intent: dict) -> dict[str, int]:
    """The log's hold, then the one target transaction: images back, later savepoints and their images gone,
    the checkpoint (from_target) and the intent's commit mark."""
    task = rt.config.task_id
    tag.restore(sp.log_tag)
    crash_point("savepoint.rollback_slot")
    schemas = rt.resumer.schemas(sp.schema_version) or {}
    restored: dict[str, int] = {}
    rt.sink.move_marks.ensure()  # the tables go back to before their later moves: their marks go (DDL first)
    with rt.sink.transaction() as cur:
        for table in sorted(schemas):
            rt.sink.move_marks.clear(cur, table)
            columns = images.shadow_columns(task, table)
            if columns:
                restored[str(table)] = images.restore(cur, task, schemas[table], columns, sp.epoch)
            crash_point("savepoint.rollback_table")
        images.delete_savepoints(cur, task, [s.name for s in later])
        if rt.resumer.writes_in_target:
            rt.resumer.write_in(cur, [checkpoint])
        images.set_pending(cur, task, sp.name, COMMITTED, intent)
        crash_point("savepoint.rollback_before_commit")
    return restored


def _finish(rt: TaskRuntime, images: BeforeImages, intent: dict) -> None:
    """After the rollback's commit: the checkpoint where the position store is not the target, the log tags of
    the dropped savepoints, then the intent."""
    task = rt.config.task_id
    rt.resumer.record_committed([PositionRecord(task, CDC_DOING, CHECKPOINT_KEY, intent["checkpoint"])])
    crash_point("savepoint.rollback_positions_written")
    tag = _log_tag(rt)
    for dropped in intent.get("drop_tags", []):
        tag.drop(dropped)
    with rt.sink.transaction() as cur:
        images.clear_pending(cur, task)


def recover(rt: TaskRuntime) -> str | None:
    """Finish what a killed rollback left: its positions when its target transaction committed; when it did not,
    nothing was rolled back (only the PostgreSQL slot may have been moved back or be missing: put back)."""
    images = BeforeImages(rt.sink)
    if not images.exists():
        return None
    task = rt.config.task_id
    with rt.sink.catalog() as cur:
        pending = images.pending(cur, task)
    if pending is None:
        return None
    name, state, intent = pending
    if state == COMMITTED:
        log.warning("completing the rollback to savepoint %s that was interrupted after its commit: writing its "
                    "checkpoint to %s", name, rt.resumer.store.describe())
        _finish(rt, images, intent)
        return f"completed the interrupted rollback to savepoint {name}"
    log.warning("the rollback to savepoint %s was interrupted before its commit: nothing was rolled back; run it again "
                "to roll back", name)
    _log_tag(rt).repair(intent["log_tag"])
    with rt.sink.transaction() as cur:
        images.clear_pending(cur, task)
    return f"the interrupted rollback to savepoint {name} did not commit: nothing was rolled back"


def delete(rt: TaskRuntime, name: str) -> SavepointReport:
    """Drop savepoint `name`; its before-images go unless an older savepoint still needs them."""
    started = time.monotonic()
    task = rt.config.task_id
    with task_lease(rt, doing=f"savepoint delete {name}"):
        recover(rt)
        sp, every = _find(rt, name)
        images = BeforeImages(rt.sink)
        older = [s for s in every if s.epoch < sp.epoch]
        newer = [s for s in every if s.epoch > sp.epoch]
        tables = [TableId.parse(t) for t in sorted({t for s in every for t in s.tables})]
        schemas = rt.resumer.schemas(sp.schema_version) or {}
        with rt.sink.transaction() as cur:
            for table in tables:
                columns = images.shadow_columns(task, table)
                if not columns:
                    continue
                if older:
                    schema = schemas.get(table) or _schema_of(rt, table)
                    images.merge_epoch(cur, task, table, schema.primary_key, columns, sp.epoch, older[-1].epoch)
                elif newer:
                    images.drop_epochs(cur, task, table, newer[0].epoch)
            images.delete_savepoints(cur, task, [name])
        _log_tag(rt).drop(sp.log_tag)
        if not older and not newer:
            for table in tables:
                images.drop_shadow(task, table)
    return SavepointReport(sp, time.monotonic() - started, "deleted")


def _schema_of(rt: TaskRuntime, table: TableId) -> TableSchema:
    record = _checkpoint_record(rt)
    version = int(record.position_data.get("schema_version", 0)) if record else 0
    return (rt.resumer.schemas(version) or {})[table]


def storage(rt: TaskRuntime) -> dict[str, int]:
    """Before-images held per table (what the savepoints cost in the target)."""
    images = BeforeImages(rt.sink)
    if not images.exists():
        return {}
    tables = {t for sp in list_savepoints(rt) for t in sp.tables}
    with rt.sink.catalog() as cur:
        return {t: images.image_count(cur, rt.config.task_id, TableId.parse(t)) for t in sorted(tables)
                if images.shadow_columns(rt.config.task_id, TableId.parse(t))}

