"""The resumer: records each split's watermarks and finished marker, and answers what is already done.

Every record goes to the position store and to position.log/finished.log. When the store lives in the
target (`from_target`), the engine writes finished markers inside the sink transaction that commits the rows instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from cdc_assets.core.positions import Position, position_from_json
from cdc_assets.core.splits import Split, SplitPhase
from cdc_assets.core.tables import TableId, TableSchema, schema_from_json, schema_to_json
from cdc_assets.resumer.logfile import PositionLog
from cdc_assets.resumer.records import (CDC_DOING, CDC_SCHEMA, CHECKPOINT_KEY, ROLLBACK_MARK, SNAPSHOT_DOING,
                                        SNAPSHOT_FINISHED, PositionRecord)
from cdc_assets.resumer.store import PositionStore


@dataclass(frozen=True)
class SplitWatermarks:
    split: Split
    plan_id: str
    low: Position
    high: Position | None = None


@dataclass(frozen=True)
class Checkpoint:
    """Where the incremental phase resumes: every change before `position` is in the target, and for each table
    in `ahead`, every change of that table before its own position (a table that joined the log phase later
    replays the log from its snapshot while the others skip what they applied already)."""

    position: Position
    schema_version: int
    events: int  # row changes applied since the incremental phase began
    ahead: dict[TableId, Position] = field(default_factory=dict)
    # "<savepoint>@<time>" when a savepoint rollback wrote it: tells a run started after a rollback from the one
    # started earlier at the same position. Never written back: the next checkpoint is the log phase's own.
    rolled_back_to: str = ""


class Resumer:
    def __init__(self, task_id: str, store: PositionStore, log: PositionLog, db_type: str) -> None:
        self.task_id = task_id
        self.store = store
        self.log = log
        self.db_type = db_type
        self.writes_in_target = getattr(store, "resume_type", "") == "from_target"

    def _put(self, records: Sequence[PositionRecord], *, store: bool = True) -> None:
        if store and self.store is not self.log:
            self.store.put(records)
        self.log.put(records)

    def _base(self, w: SplitWatermarks) -> dict:
        return {
            "db_type": self.db_type, "schema": w.split.table.namespace, "tb": w.split.table.name,
            "split": w.split.id, "plan_id": w.plan_id,
            "start": w.split.range.start, "end": w.split.range.end,
            "low_watermark": w.low.to_json(),
        }

    def _doing(self, w: SplitWatermarks, phase: SplitPhase, reads: int, **more) -> PositionRecord:
        data = {"type": "RdbSnapshot", **self._base(w), "phase": phase.value, "reads": reads, **more}
        return PositionRecord(self.task_id, SNAPSHOT_DOING, w.split.id, data)

    def record_low(self, watermarks: Sequence[SplitWatermarks]) -> dict[str, int]:
        """Before the read: the position every change not in the snapshot comes after.

        Returns how many times each split has now been read (1 unless a crash or failure came between)."""
        doing = {r.position_key: r for r in self.store.load(self.task_id, SNAPSHOT_DOING,
                                                             [w.split.id for w in watermarks])}
        reads = {w.split.id: int(doing[w.split.id].position_data.get("reads", 0)) + 1 if w.split.id in doing else 1
                 for w in watermarks}
        self._put([self._doing(w, SplitPhase.LOW_RECORDED, reads[w.split.id]) for w in watermarks])
        return reads

    def record_high(self, watermarks: Sequence[SplitWatermarks], reads: dict[str, int]) -> None:
        self._put([self._doing(w, SplitPhase.HIGH_RECORDED, reads[w.split.id], high_watermark=w.high.to_json())
                   for w in watermarks])

    def record_failed(self, watermarks: Sequence[SplitWatermarks], reads: dict[str, int], error: str) -> None:
        """A read or commit that failed: the split stays unfinished, and its record says why in one line."""
        self._put([self._doing(w, SplitPhase.FAILED, reads[w.split.id], error=error) for w in watermarks])

    def finished_records(self, watermarks: Sequence[SplitWatermarks], rows: dict[str, int]) -> list[PositionRecord]:
        return [
            PositionRecord(self.task_id, SNAPSHOT_FINISHED, w.split.id, {
                "type": "RdbSnapshotFinished", **self._base(w), "high_watermark": w.high.to_json(),
                "rows": rows.get(w.split.id, 0),
            })
            for w in watermarks
        ]

    def write_in(self, cursor, records: Sequence[PositionRecord]) -> None:
        """Write records through a caller's cursor: the target's commit transaction (`from_target`)."""
        self.store.write_in(cursor, records)

    def checkpoint_records(self, checkpoint: Checkpoint) -> list[PositionRecord]:
        data = {**checkpoint.position.to_json(), "schema_version": checkpoint.schema_version,
                "events": checkpoint.events}
        if checkpoint.ahead:
            data["tables_ahead"] = {str(t): p.to_json() for t, p in sorted(checkpoint.ahead.items())}
        return [PositionRecord(self.task_id, CDC_DOING, CHECKPOINT_KEY, data)]

    def schema_records(self, version: int, schemas: dict[TableId, TableSchema]) -> list[PositionRecord]:
        data = {"type": "CdcSchema", "version": version, "tables": [schema_to_json(s) for s in schemas.values()]}
        return [PositionRecord(self.task_id, CDC_SCHEMA, f"v{version}", data)]

    def record_committed(self, records: Sequence[PositionRecord]) -> None:
        """After the target's commit: the store (unless the commit itself wrote them, `from_target`) and the
        log files."""
        self._put(records, store=not self.writes_in_target)

    def record(self, records: Sequence[PositionRecord]) -> None:
        """Records that commit with nothing in the target (verification results): the store and the log files."""
        self._put(records)

    def checkpoint(self) -> Checkpoint | None:
        [record] = self.store.load(self.task_id, CDC_DOING, [CHECKPOINT_KEY]) or [None]
        if record is None:
            return None
        d = record.position_data
        ahead = {TableId.parse(t): position_from_json(p) for t, p in d.get("tables_ahead", {}).items()}
        return Checkpoint(position_from_json(d), int(d.get("schema_version", 0)), int(d.get("events", 0)), ahead,
                          d.get(ROLLBACK_MARK, ""))

    def schemas(self, version: int) -> dict[TableId, TableSchema] | None:
        [record] = self.store.load(self.task_id, CDC_SCHEMA, [f"v{version}"]) or [None]
        if record is None:
            return None
        return {s.table: s for s in map(schema_from_json, record.position_data["tables"])}

    def records(self) -> list[PositionRecord]:
        return self.store.load(self.task_id)

    def finished(self, split_ids: Sequence[str] | None = None, plan_id: str | None = None) -> dict[str, PositionRecord]:
        """Finished markers by split id: of `split_ids` only when given (a keyed read), else every one; of plan
        `plan_id` only when given. A table planned again (re-added to the config) reuses its split ids, and the
        old plan's markers say nothing about the new plan's splits."""
        return {r.position_key: r for r in self.store.load(self.task_id, SNAPSHOT_FINISHED, split_ids)
                if plan_id is None or r.position_data.get("plan_id") == plan_id}

    def clear(self) -> None:
        self.store.clear(self.task_id)
        if self.store is not self.log:
            self.log.clear(self.task_id)

    def close(self) -> None:
        self.store.close()
