"""Typed, actionable errors: what failed, on which object, and what to do about it.

Every message is safe to log: URLs are rendered masked before they reach an error, and a driver's own text is
`scrub`bed of the password it was given. The hints that several errors share are written here once.
"""
from __future__ import annotations

REPLAN_HINT = "re-plan and re-snapshot the task: cdc-assets plan --replan"
NETWORK_HINT = "check that the server runs, the host/port/user/password in the URL, and the network"
MASK = "***"


def scrub(text: str, secret: str) -> str:
    """`text` with `secret` masked: drivers may echo the password they were given in their messages."""
    return text.replace(secret, MASK) if secret else text


class CdcError(Exception):
    """Base error; `hint` tells the user the way out."""

    def __init__(self, message: str, hint: str = "") -> None:
        self.message = message
        self.hint = hint
        super().__init__(f"{message} -- {hint}" if hint else message)


class ConfigError(CdcError):
    """The YAML config is invalid: names the key and what is expected."""


class UnreachableError(CdcError):
    """A database did not answer; transient, worth retrying."""


class LoginError(CdcError):
    """A server (or the TLS layer) refused our login: wrong user or password, no way to send the password, a
    certificate that does not check out. Not transient: retrying cannot help."""


class SourceSetupError(CdcError):
    """The source cannot be captured as configured (log settings, privileges)."""


class TableError(CdcError):
    """A configured table is missing or cannot be split."""


class PlanError(CdcError):
    """The frozen split plan and the request disagree."""


class PositionLost(CdcError):
    """The log position to resume from no longer exists (purged binlog, dropped slot)."""


class UnmappedType(TableError):
    """A captured column's type has no mapping to the target."""


class NulInText(TableError):
    """A MySQL text value holds NUL (0x00), which PostgreSQL text cannot store (README "Type mapping")."""

    def __init__(self, table: object, key: tuple, column: str) -> None:
        super().__init__(
            f"row {key} of {table}: column '{column}' holds a NUL character (0x00), which PostgreSQL text cannot store",
            f"remove it on the source (UPDATE ... SET `{column}` = REPLACE(`{column}`, CHAR(0), '')) and run again, "
            "or leave the column out with source.exclude_columns")


class PositionsIncomparable(PositionLost):
    """Two binlog positions of different servers (a failover) that their GTID sets cannot order."""

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
        super().__init__(
            f"row {key} of {table} at {position}: column '{column}' holds {shown}, which the target's column "
            f"({target_type}) cannot hold without cutting or rounding it; nothing of this batch was written",
            f"make the target column hold it ({advice}) and run again: each run reads the target's column types "
            "anew; or leave the column out with source.exclude_columns and re-plan")
