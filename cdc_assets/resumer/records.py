"""Position records, shaped like ape-dts's position table rows.

`(task_id, resumer_type, position_key)` is unique; `position_data` is JSON tagged by "type":
    SnapshotDoing    / shop.orders:0003 -> {"type": "RdbSnapshot", "split": ..., "phase": "LOW_RECORDED", "low_watermark": {...}}
    SnapshotFinished / shop.orders:0003 -> {"type": "RdbSnapshotFinished", "split": ..., "low_watermark": ..., "high_watermark": ...}
    CdcDoing         / checkpoint       -> {"type": "MysqlCdc", ..., "schema_version": 0, "events": ...} (incremental)
    CdcSchema        / v0               -> {"type": "CdcSchema", "version": 0, "tables": [...]} (schemas of that version)
    CdcReset         / 2026-11-23T22:40:01.123456 -> {"type": "CdcReset", "to": "latest", "by": ..., "from": {...}, ...}
A SnapshotDoing record's "phase" is a `core.splits.SplitPhase`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone

SNAPSHOT_DOING = "SnapshotDoing"
SNAPSHOT_FINISHED = "SnapshotFinished"
CDC_DOING = "CdcDoing"
CDC_SCHEMA = "CdcSchema"
CDC_RESET = "CdcReset"  # one per reset of the checkpoint, keyed by its time: who moved it, from where, to where
SPLIT_VERIFY = "SplitVerify"  # the last verification of a split (engine/verify.py)
CHECKPOINT_KEY = "checkpoint"
ROLLBACK_MARK = "rolled_back_to"  # in a checkpoint a savepoint rollback wrote: "<savepoint>@<time>"


def now_text() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


@dataclass(frozen=True)
class PositionRecord:
    task_id: str
    resumer_type: str
    position_key: str
    position_data: dict
    updated_at: str = field(default_factory=now_text)

    @property
    def data_json(self) -> str:
        return json.dumps(self.position_data, sort_keys=True, separators=(",", ":"))

    def to_json(self) -> dict:
        return {
            "task_id": self.task_id,
            "resumer_type": self.resumer_type,
            "position_key": self.position_key,
            "position_data": self.position_data,
            "updated_at": self.updated_at,
        }
