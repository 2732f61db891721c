"""Typed, actionable errors: what failed, on which object, and what to do about it.

Every message is safe to log: URLs are rendered masked before they reach an error, and a driver's own text is
`scrub`bed of the password it was given. The hints that several errors share are written here once.
"""
from __future__ import annotations

REPLAN_HINT = "re-plan and re-snapshot the task: cdc-assets plan --replan"
RENAMED_TABLE_WAY_OUT = "put its new name in source.tables (and in any source setting naming it) in place of it"
MISSING_TABLE_HINT = f"create it; if it was renamed, {RENAMED_TABLE_WAY_OUT}; or remove it from source.tables"
NETWORK_HINT = "check that the server runs, the host/port/user/password in the URL, and the network"
MASK = "***"


def scrub(text: str, secret: str) -> str:
    """`text` with `secret` masked: drivers may echo the password they were given in their messages."""
    return text.replace(secret, MASK) if secret else text


class CdcError(Exception):
    """Base error; `hint` tells the user the way out. Every error below is one, and the CLI prints each as
    `error: <message> -- <hint>`."""

    def __init__(self, message: str, hint: str = "") -> None:
        self.message = message
        self.hint = hint
        super().__init__(f"{message} -- {hint}" if hint else message)


class ConfigError(CdcError):
    """The YAML config is invalid: names the key and what is expected, never the value (it may hold a password).
    Way out: fix the key named; every key is in docs/reference/config.md."""


class UnreachableError(CdcError):
    """A database did not answer; transient, retried with backoff (`pipeline.max_retries`) before the run fails
    with the masked URL. Way out: check that the server runs, the host, port, user and network."""


class LoginError(CdcError):
    """A server (or the TLS layer) refused our login: wrong user or password, no way to send the password, a
    certificate that does not check out. Not transient: retrying cannot help. The message says which connection
    was refused. Way out: fix the user, password or TLS settings in the URL (docs/connectors/mysql8.md, "Logins")."""


class SourceSetupError(CdcError):
    """The source cannot be captured as configured (log settings, privileges), found at plan time. Way out: change
    the server setting named (docs/connectors/mysql.md, docs/connectors/postgres.md, docs/connectors/mongodb.md)."""


class TableError(CdcError):
    """A configured table is missing, cannot be split, or does not fit the target (a missing column, a type the
    target lacks). Way out: the hint names the table and the statement or config key that fixes it."""


class TableMissing(TableError):
    """A configured table the source does not have under its name: never created, or renamed or dropped since.
    Way out: create it, or put its new name in source.tables in place of it, or remove it from there."""


class PlanError(CdcError):
    """The frozen split plan and the request disagree (no plan yet, a split of another plan, no checkpoint to
    reset). Way out: `cdc-assets plan` and `snapshot` first, or `plan --replan` (docs/concepts/snapshot.md)."""


class SourceBusy(CdcError):
    """The source refused a lock in time: a deadlock, or the lock wait ran out (transient, worth retrying)."""

    def __init__(self, message: str, hint: str, conflict: str) -> None:
        super().__init__(message, hint)
        self.conflict = conflict  # DEADLOCK or LOCK_WAIT_TIMEOUT


class PositionLost(CdcError):
    """The log position to resume from no longer exists (purged binlog, dropped or invalidated slot, an expired
    resume token). Way out: re-plan and re-snapshot with `cdc-assets plan --replan`; keep the log longer than
    the task may stop (docs/operations/headroom.md)."""


class UnmappedType(TableError):
    """A captured column's type has no mapping to the target, found at plan time. Way out: leave the column out
    with `source.exclude_columns` (docs/connectors/index.md, "Types with no mapping")."""


class NulInText(TableError):
    """A MySQL text value holds NUL (0x00), which PostgreSQL text cannot store (docs/connectors/mysql.md, "Type
    mapping"). Way out: remove the character on the source, or leave the column out with `source.exclude_columns`."""

    def __init__(self, table: object, key: tuple, column: str) -> None:
        super().__init__(
            f"row {key} of {table}: column '{column}' holds a NUL character (0x00), which PostgreSQL text cannot store",
            f"remove it on the source (UPDATE ... SET `{column}` = REPLACE(`{column}`, CHAR(0), '')) and run again, "
            "or leave the column out with source.exclude_columns")


class PositionsIncomparable(PositionLost):
    """Two binlog positions of different servers (a failover) that their GTID sets cannot order. Way out: GTIDs on
    before a failover, or `cdc-assets plan --replan` (docs/connectors/mysql.md, "Positions, GTIDs and failover")."""

    def __init__(self, a: object, b: object, why: str, subject: str = "") -> None:
        self.a, self.b, self.why = a, b, why
        super().__init__(
            (f"{subject}: " if subject else "") + f"cannot tell whether binlog position {a} comes before {b}: they "
            f"are positions of different servers and {why}",
            "turn GTIDs on (MySQL gtid_mode=ON) before a failover, or re-plan and re-snapshot the task: "
            "cdc-assets plan --replan")


class ValueMisfit(CdcError):
    """A log value the target column cannot hold unchanged: stored, it would be cut or rounded."""

    def __init__(self, table: object, key: tuple, column: str, value: object, target_type: str, position: object,
                 advice: str) -> None:
        shown = repr(value) if len(repr(value)) <= 60 else f"{repr(value)[:57]}..."
        if advice.lower().endswith(target_type.lower()):  # the column has the type the sink declares: none wider
            hint = ("no column type of the target holds it: change the value on the source, or leave the column "
                    "out with source.exclude_columns and re-plan")
        else:
            hint = (f"make the target column hold it ({advice}) and run again: each run reads the target's column "
                    "types anew; or leave the column out with source.exclude_columns and re-plan")
        super().__init__(
            f"row {key} of {table} at {position}: column '{column}' holds {shown}, which the target's column "
            f"({target_type}) cannot hold without cutting or rounding it; nothing of this batch was written", hint)
