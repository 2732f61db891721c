"""Log positions: frozen, ordered, JSON round-trippable values.

JSON is tagged by "type" like ape-dts's Position enum, so position.log lines read the same:
    {"type": "MysqlCdc", "binlog_filename": "mysql-bin.000004", "next_event_position": 4663, "gtid_set": "0-1-12"}
    {"type": "PgCdc", "lsn": "0/16B3748"}
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

_BINLOG_SEQ = re.compile(r"\.(\d+)$")


@dataclass(frozen=True)
class MysqlPosition:
    """A binlog coordinate: the offset *after* the last event read (resume point), plus GTID when known."""

    file: str
    pos: int
    gtid_set: str = ""

    def sort_key(self) -> tuple[int, str, int]:
        m = _BINLOG_SEQ.search(self.file)
        return (int(m.group(1)) if m else -1, self.file, self.pos)

    def to_json(self) -> dict:
        return {"type": "MysqlCdc", "binlog_filename": self.file, "next_event_position": self.pos, "gtid_set": self.gtid_set}

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" + (f" (gtid {self.gtid_set})" if self.gtid_set else "")


@dataclass(frozen=True)
class PgPosition:
    """A WAL location (LSN) as a 64-bit integer; printed the PostgreSQL way, `X/Y` in hex."""

    lsn: int

    @classmethod
    def parse_lsn(cls, text: str) -> "PgPosition":
        high, low = text.split("/")
        return cls((int(high, 16) << 32) + int(low, 16))

    def sort_key(self) -> tuple[int]:
        return (self.lsn,)

    def to_json(self) -> dict:
        return {"type": "PgCdc", "lsn": str(self)}

    def __str__(self) -> str:
        return f"{self.lsn >> 32:X}/{self.lsn & 0xFFFFFFFF:X}"


Position = Union[MysqlPosition, PgPosition]


def position_from_json(data: dict) -> Position:
    kind = data.get("type")
    if kind == "MysqlCdc":
        return MysqlPosition(data["binlog_filename"], int(data["next_event_position"]), data.get("gtid_set", ""))
    if kind == "PgCdc":
        return PgPosition.parse_lsn(data["lsn"])
    raise ValueError(f"unknown position type {kind!r}")


def is_before(a: Position, b: Position) -> bool:
    if type(a) is not type(b):
        raise TypeError(f"cannot compare {type(a).__name__} with {type(b).__name__}")
    return a.sort_key() < b.sort_key()


def earliest(positions: list[Position]) -> Position | None:
    return min(positions, key=lambda p: p.sort_key()) if positions else None
