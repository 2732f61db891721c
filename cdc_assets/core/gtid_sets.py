"""GTID sets as the servers print them, and the two operations positions need: add one GTID, compare two sets.

Two formats, told apart by their text (a set never mixes them):
- MySQL `@@gtid_executed`: `uuid:1-5:7,uuid2:1-3`, or with a tag (8.3+) `uuid:tag:1-5`; intervals are closed.
  A set is every transaction it names; adding `uuid:6` to `uuid:1-5:7` gives `uuid:1-7`.
- MariaDB `@@gtid_binlog_pos`: `domain-server-seq,...`, one GTID per replication domain, the last one logged.
  Sequence numbers grow within a domain whatever server logs them (gtid_strict_mode), so a position holds
  every group of a domain up to its seq; the server id in the middle names who logged that last group.

`contains(a, b)` answers "has `a` every transaction of `b`", which orders positions of *different* servers
(a failover): file/offset pairs mean nothing across servers, the transactions included do.
"""
from __future__ import annotations

import re

_UUID = re.compile(r"^[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$")
_MARIADB_GTID = re.compile(r"^(\d+)-(\d+)-(\d+)$")
_TAG = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,31}$")

Intervals = list[tuple[int, int]]  # sorted, disjoint, closed [first, last]
MysqlSet = dict[str, Intervals]  # "uuid" or "uuid:tag" -> intervals
MariadbSet = dict[int, tuple[int, int]]  # domain -> (server_id, seq)


def is_mariadb(text: str) -> bool:
    first = text.split(",")[0].strip()
    return bool(_MARIADB_GTID.match(first))


def parse_mariadb(text: str) -> MariadbSet:
    out: MariadbSet = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        m = _MARIADB_GTID.match(item)
        if m is None:
            raise ValueError(f"not a MariaDB GTID (domain-server-seq): {item!r} in {text!r}")
        domain, server, seq = (int(g) for g in m.groups())
        if domain not in out or out[domain][1] < seq:
            out[domain] = (server, seq)
    return out


def format_mariadb(gtids: MariadbSet) -> str:
    return ",".join(f"{d}-{s}-{n}" for d, (s, n) in sorted(gtids.items()))


def parse_mysql(text: str) -> MysqlSet:
    out: MysqlSet = {}
    for item in filter(None, (part.strip() for part in text.replace("\n", "").split(","))):
        fields = item.split(":")
        if not _UUID.match(fields[0]):
            raise ValueError(f"not a MySQL GTID set member (uuid:interval...): {item!r} in {text!r}")
        key = fields[0].lower()
        for field in fields[1:]:
            if _TAG.match(field):
                key = f"{fields[0].lower()}:{field.lower()}"  # intervals after a tag belong to it
                out.setdefault(key, [])
                continue
            first, _, last = field.partition("-")
            out[key] = _merge(out.get(key, []), (int(first), int(last or first)))
    return out


def format_mysql(gtids: MysqlSet) -> str:
    def one(interval: tuple[int, int]) -> str:
        return str(interval[0]) if interval[0] == interval[1] else f"{interval[0]}-{interval[1]}"
    return ",".join(f"{key}:" + ":".join(one(i) for i in intervals) for key, intervals in sorted(gtids.items())
                    if intervals)


def _merge(intervals: Intervals, new: tuple[int, int]) -> Intervals:
    out: Intervals = []
    lo, hi = new
    for a, b in intervals:
        if b + 1 < lo or hi + 1 < a:
            out.append((a, b))
        else:
            lo, hi = min(lo, a), max(hi, b)
    return sorted(out + [(lo, hi)])


def add(gtid_set: str, gtid: str) -> str:
    """The set after the group `gtid` (`uuid:n`, `uuid:tag:n` or `d-s-n`) was logged on top of `gtid_set`."""
    if _MARIADB_GTID.match(gtid):
        gtids = parse_mariadb(gtid_set)
        domain, server, seq = (int(g) for g in _MARIADB_GTID.match(gtid).groups())
        gtids[domain] = (server, seq)  # the domain's last group, even if a lower seq (non-strict mode)
        return format_mariadb(gtids)
    return format_mysql(parse_mysql(f"{gtid_set},{gtid}" if gtid_set else gtid))


def contains(a: str, b: str) -> bool:
    """Does set `a` hold every transaction of set `b`?"""
    if not b.strip():
        return True
    if is_mariadb(b) or (a.strip() and is_mariadb(a)):
        have = parse_mariadb(a)
        return all(d in have and have[d][1] >= seq for d, (_, seq) in parse_mariadb(b).items())
    have = parse_mysql(a)
    return all(_covered(have.get(key, []), interval) for key, intervals in parse_mysql(b).items()
               for interval in intervals)


def _covered(intervals: Intervals, interval: tuple[int, int]) -> bool:
    return any(a <= interval[0] and interval[1] <= b for a, b in intervals)
