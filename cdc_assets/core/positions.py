"""Log positions: frozen, ordered, JSON round-trippable values.

JSON is tagged by "type" like ape-dts's Position enum, so position.log lines read the same:
    {"type": "MysqlCdc", "binlog_filename": "mysql-bin.000004", "next_event_position": 4663, "gtid_set": "0-1-12",
     "server": "1"}
    {"type": "PgCdc", "lsn": "0/16B3748"}
    {"type": "MongoCdc", "resume_token": "8263515EAC000000022B0429296E1404", "cluster_time": {"t": 1666277036, "i": 2}}

Ordering binlog positions across a failover: a file/offset pair means something only on the server that wrote
it, so two positions of different servers (both `server`s known and different) are ordered by the transactions
they include, their GTID sets; when either lacks a set, or neither set holds the other, `is_before` raises
PositionsIncomparable instead of comparing apples and oranges. Positions of one server (or of an unknown one,
as recorded before servers were) compare by file/offset.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cmp_to_key
from typing import Union

from cdc_assets.core import gtid_sets
from cdc_assets.errors import ConfigError, PositionsIncomparable

_BINLOG_SEQ = re.compile(r"\.(\d+)$")


@dataclass(frozen=True)
class MysqlPosition:
    """A binlog coordinate: the offset *after* the last event read (resume point) in `file` of `server`.

    `gtid_set`: every GTID the server had logged at that point (MySQL gtid_executed, MariaDB gtid_binlog_pos),
    "" when the server has none or it is unknown. `server`: whose binlog `file` is, @@server_uuid on MySQL,
    @@server_id on MariaDB; "" when unknown."""

    file: str
    pos: int
    gtid_set: str = ""
    server: str = ""

    def sort_key(self) -> tuple[int, str, int]:
        m = _BINLOG_SEQ.search(self.file)
        return (int(m.group(1)) if m else -1, self.file, self.pos)

    def to_json(self) -> dict:
        data = {"type": "MysqlCdc", "binlog_filename": self.file, "next_event_position": self.pos,
                "gtid_set": self.gtid_set}
        return {**data, "server": self.server} if self.server else data

    def same_server(self, other: "MysqlPosition") -> bool:
        return not self.server or not other.server or self.server == other.server

    def __str__(self) -> str:
        where = f" of server {self.server}" if self.server else ""
        return f"{self.file}:{self.pos}{where}" + (f" (gtid {self.gtid_set})" if self.gtid_set else "")


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


@dataclass(frozen=True)
class MongoPosition:
    """A change-stream resume token (the hex `_data` string of MongoDB >= 4.0.7 / fCV >= 4.2) and its cluster time.

    Ordered by the token's bytes: `_data` is a KeyString (MongoDB's memcmp-ordered key encoding) that starts with
    the cluster time (type byte 0x82, then the Timestamp's 8 bytes big-endian) and goes on with the transaction's
    operation index and the document key, so event tokens and high-water-mark tokens (postBatchResumeToken) sort
    in event order ("Resume Tokens", https://www.mongodb.com/docs/manual/changeStreams/#resume-tokens). Tokens of
    the 3.6 BinData form are not accepted: they do not sort. (The head, cluster time first, is the same in every
    hex token version, so tokens of different versions still order by cluster time.)
    """

    resume_token: str  # upper-case hex, as the server emits it
    cluster_time: tuple[int, int]  # bson Timestamp (t seconds, i increment)

    def __post_init__(self) -> None:
        try:
            raw = bytes.fromhex(self.resume_token)
        except (TypeError, ValueError):  # a 3.6-era BinData token is bytes, not text
            raw = b""
        if not raw or raw[0] != _KEYSTRING_TIMESTAMP:
            raise ValueError(f"resume token {self.resume_token[:40]!r} is not a hex KeyString _data "
                             "(MongoDB >= 4.0.7 with featureCompatibilityVersion >= 4.2 emits one)")
        object.__setattr__(self, "resume_token", raw.hex().upper())
        object.__setattr__(self, "cluster_time", (int(self.cluster_time[0]), int(self.cluster_time[1])))

    @property
    def token_time(self) -> tuple[int, int]:
        """The cluster time encoded at the head of the token itself."""
        raw = bytes.fromhex(self.resume_token)
        return int.from_bytes(raw[1:5], "big"), int.from_bytes(raw[5:9], "big")

    def sort_key(self) -> tuple[bytes]:
        return (bytes.fromhex(self.resume_token),)

    def to_json(self) -> dict:
        t, i = self.cluster_time
        return {"type": "MongoCdc", "resume_token": self.resume_token, "cluster_time": {"t": t, "i": i}}

    def __str__(self) -> str:
        return f"resume token {self.resume_token} (cluster time {self.cluster_time[0]}.{self.cluster_time[1]})"


_KEYSTRING_TIMESTAMP = 0x82  # KeyString CType of a BSON Timestamp (src/mongo/db/storage/key_string.cpp)

Position = Union[MysqlPosition, PgPosition, MongoPosition]


def position_from_json(data: dict) -> Position:
    kind = data.get("type")
    if kind == "MysqlCdc":
        return MysqlPosition(data["binlog_filename"], int(data["next_event_position"]), data.get("gtid_set", ""),
                             str(data.get("server", "")))
    if kind == "PgCdc":
        return PgPosition.parse_lsn(data["lsn"])
    if kind == "MongoCdc":
        time = data["cluster_time"]
        return MongoPosition(data["resume_token"], (int(time["t"]), int(time["i"])))
    raise ValueError(f"unknown position type {kind!r}")


POSITION_FORMS = ('MySQL: mysql-bin.000004:4663 or {"binlog_filename": "mysql-bin.000004", "next_event_position": '
                  '4663, "gtid_set": "0-1-12"}; PostgreSQL: 0/16B3748 or {"lsn": "0/16B3748"}; '
                  "MongoDB: a position's JSON as position.log shows it")


def parse_position(text: str, db_type: str) -> Position:
    """A position as JSON (a position.log record's, or its fields) or as text, for a source of `db_type`."""
    text = text.strip()
    try:
        if text.startswith("{"):
            data = json.loads(text)
            if "type" not in data:
                data = {**data, "type": "PgCdc" if "lsn" in data else "MongoCdc" if "resume_token" in data else "MysqlCdc"}
            position = position_from_json(data)
        elif db_type == "mongo":
            raise ValueError("a MongoDB position is a resume token: give its JSON")
        elif db_type == "postgres":
            position = PgPosition.parse_lsn(text)
        else:
            file, _, offset = text.rpartition(":")
            position = MysqlPosition(file, int(offset))
            if not file:
                raise ValueError("no binlog file name")
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot read the position {text!r}: {exc}", f"give it as {POSITION_FORMS}") from None
    wanted = {"postgres": PgPosition, "mongo": MongoPosition}.get(db_type, MysqlPosition)
    if not isinstance(position, wanted):
        raise ConfigError(f"position {position} is not a position of a {db_type} source",
                          f"give it as {POSITION_FORMS}")
    return position


def compare(a: Position, b: Position) -> int:
    """-1, 0 or 1 as `a` is before, at or after `b`; across servers by GTID sets (see the module docstring).
    Raises PositionsIncomparable."""
    if type(a) is not type(b):
        raise TypeError(f"cannot compare {type(a).__name__} with {type(b).__name__}")
    if isinstance(a, MysqlPosition) and not a.same_server(b):
        return _compare_gtids(a, b)
    ka, kb = a.sort_key(), b.sort_key()
    return (ka > kb) - (ka < kb)


def _compare_gtids(a: MysqlPosition, b: MysqlPosition) -> int:
    if a.gtid_set and b.gtid_set:
        a_has_b, b_has_a = gtid_sets.contains(a.gtid_set, b.gtid_set), gtid_sets.contains(b.gtid_set, a.gtid_set)
        if a_has_b or b_has_a:
            return a_has_b - b_has_a
        why = "neither GTID set holds the other (the servers logged transactions in another order or domain)"
    else:
        why = "a GTID set is missing (the server has gtid_mode OFF, or the position was recorded without one)"
    raise PositionsIncomparable(a, b, why)


def is_before(a: Position, b: Position, subject: str = "") -> bool:
    """`subject` names what is compared (a table's watermarks) in the error when positions cannot be ordered."""
    try:
        return compare(a, b) < 0
    except PositionsIncomparable as exc:
        if not subject:
            raise
        raise PositionsIncomparable(exc.a, exc.b, exc.why, subject) from None


def earliest(positions: list[Position]) -> Position | None:
    return min(positions, key=cmp_to_key(compare)) if positions else None


def latest(positions: list[Position]) -> Position | None:
    return max(positions, key=cmp_to_key(compare)) if positions else None
