"""position.log and finished.log, in ape-dts's line format, and resuming from them alone.

    2024-10-10 04:04:08.152044 | current_position | {"type":"RdbSnapshot", ...}
    2024-10-10 04:04:08.152181 | checkpoint_position | {"type":"MysqlCdc", ...}
    2024-10-10 04:04:07.803422 | {"type":"RdbSnapshotFinished", ...}

Each JSON carries `task_id` and `position_key`, so the files can rebuild the position table.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

from cdc_assets.resumer.records import (CDC_DOING, CDC_RESET, CDC_SCHEMA, SNAPSHOT_DOING, SNAPSHOT_FINISHED,
                                        SPLIT_VERIFY, PositionRecord, now_text)

POSITION_LOG = "position.log"
FINISHED_LOG = "finished.log"
_KINDS = {CDC_DOING: "checkpoint_position", CDC_SCHEMA: "schema_version", CDC_RESET: "reset",
          SPLIT_VERIFY: "split_verify"}
_TYPES = {kind: resumer_type for resumer_type, kind in _KINDS.items()}


class PositionLog:
    """Appends every record; finished markers are fsynced because from_log resumes on them."""

    resume_type = "from_log"

    def __init__(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = log_dir

    def put(self, records: Sequence[PositionRecord]) -> None:
        position_lines, finished_lines = [], []
        for r in records:
            data = json.dumps({**r.position_data, "task_id": r.task_id, "position_key": r.position_key})
            if r.resumer_type == SNAPSHOT_FINISHED:
                finished_lines.append(f"{r.updated_at} | {data}\n")
            else:
                position_lines.append(f"{r.updated_at} | {_KINDS.get(r.resumer_type, 'current_position')} | {data}\n")
        # Checkpoints are what from_log resumes the incremental phase on: durable like finished markers.
        self._append(POSITION_LOG, position_lines, sync=any(r.resumer_type != SNAPSHOT_DOING for r in records))
        self._append(FINISHED_LOG, finished_lines, sync=True)

    def _append(self, name: str, lines: list[str], sync: bool) -> None:
        if not lines:
            return
        with open(self.log_dir / name, "a", encoding="utf-8") as f:
            f.write("".join(lines))
            f.flush()
            if sync:
                os.fsync(f.fileno())

    def load(self, task_id: str, resumer_type: str | None = None,
             keys: Sequence[str] | None = None) -> list[PositionRecord]:
        """The files have no index: a keyed read still parses them, but only the file that holds the type."""
        wanted = None if keys is None else set(keys)
        latest: dict[tuple[str, str], PositionRecord] = {}
        for kind, stamp, data in self._read(resumer_type):
            if data.pop("task_id", None) != task_id or (resumer_type is not None and kind != resumer_type):
                continue
            key = data.pop("position_key")
            if wanted is None or key in wanted:
                latest[(kind, key)] = PositionRecord(task_id, kind, key, data, stamp)
        return list(latest.values())

    def _read(self, resumer_type: str | None = None):
        names = {None: (POSITION_LOG, FINISHED_LOG), SNAPSHOT_FINISHED: (FINISHED_LOG,)}.get(resumer_type, (POSITION_LOG,))
        for name in names:
            path = self.log_dir / name
            if not path.exists():
                continue
            for line in path.read_text(encoding="utf-8").splitlines():
                parts = line.split(" | ", 2)
                try:
                    data = json.loads(parts[-1])
                except json.JSONDecodeError:
                    continue  # a line torn by a crash mid-write: the record before it still stands
                if name == FINISHED_LOG:
                    yield SNAPSHOT_FINISHED, parts[0], data
                elif len(parts) == 3:
                    yield _TYPES.get(parts[1], SNAPSHOT_DOING), parts[0], data

    def clear(self, task_id: str) -> None:
        """Keep history: mark a reset instead of rewriting the files."""
        stamp = now_text()
        for name in (POSITION_LOG, FINISHED_LOG):
            if (self.log_dir / name).exists():
                os.replace(self.log_dir / name, self.log_dir / f"{name}.{stamp.replace(' ', 'T')}.bak")

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return f"{self.log_dir / POSITION_LOG} and {FINISHED_LOG}"
