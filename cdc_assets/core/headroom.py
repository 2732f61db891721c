"""Headroom: how close a task is to losing its position, decided from figures the source read (pure, no I/O).

    OK   -- the log the task needs is retained with room to spare
    WARN -- it is still there, but will go soon: WARN_FRACTION or less of the allowance is left
    LOST -- it is gone: no run can resume; the text says the way out

MySQL/MariaDB expire a binlog file once its last write is older than the retention (binlog_expire_logs_seconds,
or expire_logs_days): the file holding the needed position was last written when the next file was created, so
its time left is retention - (now - creation of the next file), and the current file is never expired.
PostgreSQL invalidates a slot whose retained WAL (pg_current_wal_lsn() - restart_lsn) exceeds
max_slot_wal_keep_size at a checkpoint: pg_replication_slots says wal_status 'unreserved' once past it (lost at
the next checkpoint), 'lost' after, and safe_wal_size is the WAL that can still be written before it.
MongoDB's oplog is capped: it drops its oldest entries as new ones come, and a change stream resumes only from a
position the oplog still holds. The entries before the needed position go first; written at the pace the window
(newest - oldest entry) was, they last about as long as they span.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from cdc_assets.errors import REPLAN_HINT

WARN_FRACTION = 0.25  # warn with a quarter of the allowance left: time for a person to act on an alert


class Level(str, Enum):
    OK = "ok"
    WARN = "warn"
    LOST = "lost"


@dataclass(frozen=True)
class Headroom:
    level: Level
    text: str  # one line for a sensor's skip reason, a check's description and the CLI
    figures: dict[str, int | float | str] = field(default_factory=dict)  # for metadata; names carry their unit
    way_out: str = ""  # set when LOST

    def __str__(self) -> str:
        return f"headroom {self.level.value}: {self.text}" + (f"; {self.way_out}" if self.way_out else "")


@dataclass(frozen=True)
class BinlogFigures:
    server: str
    needed: str  # "mysql-bin.000007:1234", the position the task resumes from
    needed_file: str
    files: tuple[str, ...]  # retained, oldest first (SHOW BINARY LOGS)
    listed: bool  # needed_file is one of `files` of the server that wrote the position
    retention_secs: int | None  # None: no automatic expiry
    closed_age_secs: float | None  # now - creation of the file after needed_file (after files[0] when
    #                                 needed_file is gone but `gtid_reachable`); None when that file is current
    gtid_reachable: bool = False  # the position's GTID set holds every GTID before files[0]: a stream starts
    #                               there by GTID set (another server's position, or its own file purged)


def binlog_headroom(f: BinlogFigures) -> Headroom:
    figures: dict = {"binlog_files_retained": len(f.files), "oldest_binlog_file": f.files[0] if f.files else "",
                     "needed_binlog_file": f.needed_file}
    if not f.listed and f.gtid_reachable:
        return _binlog_left(f, f.files[0], f"position {f.needed} resumes by its GTID set from the oldest retained "
                            f"file {f.files[0]} ({f.needed_file} is not in the binlog of {f.server})", figures)
    if not f.listed:
        return Headroom(Level.LOST, f"the binlog file {f.needed_file} holding position {f.needed} is not in the "
                        f"binlog of {f.server} (purged, or another server's; oldest retained: "
                        f"{figures['oldest_binlog_file'] or 'none'}), and its GTID set does not reach that file",
                        figures, REPLAN_HINT)
    return _binlog_left(f, f.needed_file, f"position {f.needed} is in {f.needed_file}", figures)


def _binlog_left(f: BinlogFigures, file: str, where: str, figures: dict) -> Headroom:
    """`file`: the retained file the stream needs first."""
    behind = len(f.files) - 1 - f.files.index(file)
    figures["binlog_files_behind"] = behind
    where = f"{where}, {behind} of {len(f.files)} retained files behind the end"
    if f.retention_secs is None:
        return Headroom(Level.OK, f"{where}; {f.server} expires no binlogs automatically", figures)
    figures["retention_seconds"] = f.retention_secs
    if f.closed_age_secs is None:  # the current file: expiry starts once the server moves to the next one
        left = float(f.retention_secs)
    else:
        left = f.retention_secs - f.closed_age_secs
    figures["seconds_left"] = round(max(left, 0.0), 1)
    if left <= f.retention_secs * WARN_FRACTION:
        return Headroom(Level.WARN, f"{where}; it expires in {_span(max(left, 0.0))} (retention "
                        f"{_span(f.retention_secs)}): run the incremental phase, or raise binlog_expire_logs_seconds",
                        figures)
    return Headroom(Level.OK, f"{where}; {_span(left)} left of a {_span(f.retention_secs)} retention", figures)


@dataclass(frozen=True)
class SlotFigures:
    slot: str
    server: str
    exists: bool
    wal_status: str | None  # reserved / extended / unreserved / lost
    retained_bytes: int | None  # pg_current_wal_lsn() - restart_lsn
    max_keep_bytes: int | None  # max_slot_wal_keep_size; None: -1, no limit
    safe_bytes: int | None  # safe_wal_size; None without a limit


def slot_headroom(f: SlotFigures) -> Headroom:
    if not f.exists:
        return Headroom(Level.LOST, f"replication slot {f.slot} does not exist on {f.server}", {}, REPLAN_HINT)
    figures: dict = {"wal_status": f.wal_status or "", "retained_wal_bytes": f.retained_bytes or 0}
    if f.wal_status == "lost":
        return Headroom(Level.LOST, f"replication slot {f.slot} on {f.server} was invalidated: it held back more "
                        "WAL than max_slot_wal_keep_size allows", figures, REPLAN_HINT)
    held = f"slot {f.slot} holds {_bytes(f.retained_bytes or 0)} of WAL"
    if f.max_keep_bytes is None:
        return Headroom(Level.OK, f"{held}; no max_slot_wal_keep_size: only the disk limits it", figures)
    figures["max_slot_wal_keep_bytes"] = f.max_keep_bytes
    figures["safe_wal_bytes"] = f.safe_bytes if f.safe_bytes is not None else -1
    if f.wal_status == "unreserved" or (f.safe_bytes is not None and f.safe_bytes <= 0):
        return Headroom(Level.WARN, f"{held}, past max_slot_wal_keep_size {_bytes(f.max_keep_bytes)} (wal_status "
                        "unreserved): the next checkpoint invalidates it: run the incremental phase now, or raise "
                        "max_slot_wal_keep_size", figures)
    safe = f.safe_bytes if f.safe_bytes is not None else f.max_keep_bytes - (f.retained_bytes or 0)
    if safe <= f.max_keep_bytes * WARN_FRACTION:
        return Headroom(Level.WARN, f"{held}; {_bytes(safe)} more before max_slot_wal_keep_size "
                        f"{_bytes(f.max_keep_bytes)} invalidates it: run the incremental phase, or raise "
                        "max_slot_wal_keep_size", figures)
    return Headroom(Level.OK, f"{held}; {_bytes(safe)} left of max_slot_wal_keep_size "
                    f"{_bytes(f.max_keep_bytes)}", figures)


@dataclass(frozen=True)
class OplogFigures:
    server: str
    needed: tuple[int, int] | None  # the cluster time (s, increment) of the position the task resumes from
    first: tuple[int, int] | None  # the oldest oplog entry's; None without read access to local.oplog.rs
    last: tuple[int, int] | None  # the newest one's


def oplog_headroom(f: OplogFigures) -> Headroom:
    if f.first is None or f.last is None:
        return Headroom(Level.WARN, f"the oplog of {f.server} cannot be read (no access to local.oplog.rs): how long "
                        "it holds the task's position is unknown; grant the user read on the local database")
    window = f.last[0] - f.first[0]
    figures: dict = {"oplog_window_seconds": window}
    if f.needed is None:
        return Headroom(Level.OK, f"no position needed yet; the oplog of {f.server} spans {_span(window)}", figures)
    if f.needed < f.first:
        return Headroom(Level.LOST, f"the oplog of {f.server} no longer holds position {f.needed} (its oldest "
                        f"entry is {f.first})", figures, REPLAN_HINT)
    before = f.needed[0] - f.first[0]
    figures["oplog_seconds_before_needed"] = before
    held = f"position {f.needed}: {_span(before)} of the {_span(window)} oplog window of {f.server} go before it"
    if before <= window * WARN_FRACTION:
        return Headroom(Level.WARN, f"{held}: run the incremental phase, or grow the oplog (replSetResizeOplog, "
                        "oplogMinRetentionHours)", figures)
    return Headroom(Level.OK, held, figures)


def _span(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} hours"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"
