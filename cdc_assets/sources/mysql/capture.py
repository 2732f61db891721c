"""Can this MySQL/MariaDB server be captured? A pure decision from its flavour and `SHOW GLOBAL VARIABLES`.

Refused (each problem names the server and the setting to change):
- log_bin OFF; binlog_format not ROW; binlog_row_image not FULL (the log phase needs whole rows);
- binlog_row_metadata not FULL, or missing (MySQL < 8.0.1, MariaDB < 10.5): row events then carry no column
  names, and the reader maps values by name;
- a replica (its replica status names a source) with log_replica_updates / log_slave_updates OFF: what it
  applies from its source never reaches its own binlog;
- binlog_transaction_compression ON (MySQL >= 8.0.20): TRANSACTION_PAYLOAD events our binlog library does not
  read; binlog_row_value_options PARTIAL_JSON (MySQL >= 8.0.3): JSON updates logged as diffs we refuse.
Reported: how long the server keeps binlogs (binlog_expire_logs_seconds, else expire_logs_days), with a
warning under a day: a task stopped for longer cannot resume.
"""
from __future__ import annotations

from dataclasses import dataclass

from cdc_assets.dbapi.mysql_flavour import MysqlFlavour

SHORT_RETENTION_SECS = 86400
DAY = 86400

# Every variable the decision reads; absent ones are absent on that server version.
VARIABLES = ("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "log_replica_updates",
             "log_slave_updates", "binlog_transaction_compression", "binlog_row_value_options",
             "binlog_expire_logs_seconds", "expire_logs_days", "binlog_expire_logs_auto_purge")


@dataclass(frozen=True)
class CaptureCheck:
    problems: tuple[str, ...]  # each: what is wrong on which server, and the setting to change
    retention: str  # "binlog retention on <server>: 30 days (binlog_expire_logs_seconds=2592000)"
    warnings: tuple[str, ...] = ()

    @property
    def notes(self) -> list[str]:
        return [self.retention, *self.warnings]


def _on(value: str | None) -> bool:
    return str(value).upper() in ("1", "ON")


def check(flavour: MysqlFlavour, variables: dict[str, str], replica: bool, server: str) -> CaptureCheck:
    """`variables`: SHOW GLOBAL VARIABLES as {name (any case): value}; `replica`: the replica status statement
    returned a row naming a source."""
    v = {k.lower(): ("" if value is None else str(value)) for k, value in variables.items()}
    problems = []
    if not _on(v.get("log_bin")):
        problems.append(f"the binlog is off on {server}: start it with --log-bin (and a server-id)")
    for name, want in (("binlog_format", "ROW"), ("binlog_row_image", "FULL")):
        if v.get(name, "").upper() != want:
            problems.append(f"{name} is {v.get(name) or 'unset'} on {server}: set {name}={want}")
    if "binlog_row_metadata" not in v:
        problems.append(f"{server} ({flavour}) has no binlog_row_metadata, so row events carry no column names: "
                        "upgrade to MySQL >= 8.0.1 or MariaDB >= 10.5 and set binlog_row_metadata=FULL")
    elif v["binlog_row_metadata"].upper() != "FULL":
        problems.append(f"binlog_row_metadata is {v['binlog_row_metadata']} on {server}: set "
                        "binlog_row_metadata=FULL (row events then carry column names)")
    updates = flavour.log_replica_updates_variable
    if replica and not _on(v.get(updates, v.get("log_slave_updates"))):
        problems.append(f"{server} is a replica and {updates} is OFF: changes it applies from its source never "
                        f"reach its binlog: set {updates}=ON, or capture its source")
    if _on(v.get("binlog_transaction_compression")):
        problems.append(f"binlog_transaction_compression is ON on {server}: compressed transaction payloads "
                        "cannot be read: set binlog_transaction_compression=OFF")
    if v.get("binlog_row_value_options", ""):
        problems.append(f"binlog_row_value_options is {v['binlog_row_value_options']} on {server}: JSON "
                        "updates are logged as partial diffs: set binlog_row_value_options=''")
    retention, seconds = retention_of(v)
    warnings = ()
    if seconds is not None and seconds < SHORT_RETENTION_SECS:
        warnings = (f"binlog retention on {server} is {_span(seconds)}, under a day: a task stopped longer than "
                    "that must re-snapshot; raise binlog_expire_logs_seconds",)
    return CaptureCheck(tuple(problems), f"binlog retention on {server}: {retention}", warnings)


def retention_of(v: dict[str, str]) -> tuple[str, int | None]:
    """(text, seconds or None for no expiry). MySQL 8.0 uses binlog_expire_logs_seconds when non-zero, else
    expire_logs_days (removed in 8.4); MariaDB >= 10.6 keeps the two in step; 8.0.29's
    binlog_expire_logs_auto_purge=OFF turns expiry off whatever they say."""
    if "binlog_expire_logs_auto_purge" in v and not _on(v["binlog_expire_logs_auto_purge"]):
        return "no automatic expiry (binlog_expire_logs_auto_purge=OFF): binlogs stay until purged", None
    seconds = int(float(v.get("binlog_expire_logs_seconds") or 0))
    if seconds:
        return f"{_span(seconds)} (binlog_expire_logs_seconds={seconds})", seconds
    days = float(v.get("expire_logs_days") or 0)
    if days:
        return f"{_span(int(days * DAY))} (expire_logs_days={v['expire_logs_days']})", int(days * DAY)
    return "no expiry set (binlog_expire_logs_seconds=0): binlogs stay until purged", None


def _span(seconds: int) -> str:
    if seconds >= DAY and seconds % DAY == 0:
        return f"{seconds // DAY} days"
    if seconds >= 3600:
        return f"{seconds / 3600:g} hours"
    return f"{seconds} s"
