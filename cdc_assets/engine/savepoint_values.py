"""What a savepoint is, as one target stores it (a row of `cdc_assets_meta.savepoints`), and what a savepoint
command reports per target."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from cdc_assets.core.positions import Position, position_from_json
from cdc_assets.errors import CdcError
from cdc_assets.sinks.before_images import SavepointRow

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class SavepointError(CdcError):
    """A savepoint that cannot be created, rolled back to or deleted; the message says why (an unknown name, a plan
    or schema changed since, the log no longer reaching it) and on which target. Way out: the hint
    (docs/operations/savepoints.md)."""


def check_name(name: str) -> None:
    if not NAME.match(name or ""):
        raise SavepointError(f"savepoint name {name!r} is not allowed",
                             "use 1-100 letters, digits, '_', '.', '-', starting with a letter or digit")


@dataclass(frozen=True)
class Savepoint:
    name: str
    epoch: int
    created_at: str
    checkpoint: dict  # the target's CdcDoing record's data, as it stood
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
    """One target's part of a savepoint command. `target`: its name, with several targets (None with one).
    `savepoint`: None where a delete found none on this target (deleted there before)."""

    name: str
    savepoint: Savepoint | None
    seconds: float
    action: str  # created, kept (there already at this state), rolled back to, deleted, not on
    target: str | None = None
    restored: dict[str, int] = field(default_factory=dict)  # rollback: keys put back per table
    dropped: list[str] = field(default_factory=list)  # rollback: later savepoints dropped

    def lines(self) -> list[str]:
        on = f"target {self.target}: " if self.target else ""
        if self.savepoint is None:
            return [f"{on}no savepoint {self.name} (deleted there before): nothing to delete"]
        out = [f"{on}{self.action} savepoint {self.savepoint.line()} in {self.seconds:.3f} s"]
        if self.restored:
            out.append(f"{on}keys restored: " + ", ".join(f"{t}: {n}" for t, n in sorted(self.restored.items())))
        if self.dropped:
            out.append(f"{on}later savepoints dropped (their state is gone): {', '.join(self.dropped)}")
        return out
