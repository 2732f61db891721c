"""What the rows a table had before an ADD COLUMN got in the new column. No log event carries it: the target adds
the column with that value as its default, so its rows get what the source's did. It is the value as of the ADD,
not the column's default when the log phase meets it (a later SET DEFAULT, or a MySQL MODIFY, which drops a
default it does not repeat, changes the default, not those rows). Where the source cannot say what it was (an
expression it evaluated, per row or at the ADD), the task stops rather than leave the target's rows NULL."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class AddedFill:
    """Per added column: `literals`, the SQL constant its rows there before got (every target engine reads it as
    the same value); `unknown`, why the task cannot know what they got. A column in neither got NULL."""
    literals: dict[str, str] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)


def number(text: str) -> str | None:
    """`text` as it is when it is a plain number."""
    return text if _NUMBER.fullmatch(text) else None


def quoted(text: str) -> str | None:
    """`text` as a quoted SQL string both engines read alike; None when it has a backslash (an escape in MySQL's
    strings, a character in PostgreSQL's)."""
    return None if "\\" in text else "'" + text.replace("'", "''") + "'"
