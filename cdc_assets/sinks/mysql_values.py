"""Log values as the parameters a MySQL target's statements take, where PyMySQL would render them differently from
what the snapshot loads: a bit string as its number, a PostgreSQL array as the JSON text the snapshot writes."""
from __future__ import annotations

from typing import Any, Callable

from cdc_assets.core.tables import Column, Kind
from cdc_assets.sinks.array_json import array_json


def log_adapter(column: Column, declared: str) -> Callable[[Any], Any] | None:
    """How a log value of `column`, declared `declared` in the target, becomes its parameter; None: as it is."""
    if column.kind == Kind.BIT and declared.startswith("bit"):
        return lambda v: int(v, 2)  # a bit string, not its characters' bytes
    if column.kind == Kind.ARRAY:
        return array_json(column.element or "")
    return None
