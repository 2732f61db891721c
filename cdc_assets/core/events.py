"""Change events read from a source log, in the shape every sink applies.

Values are Python values as the log library decodes them, normalised by the source's log reader to
the same Python types its snapshot would produce (bytes for binary, str for JSON text, Decimal, ...).
A row image may be partial: PostgreSQL leaves unchanged TOASTed columns out of an UPDATE's new image;
those columns are simply absent from `after` and must not be overwritten.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from cdc_assets.core.positions import Position
from cdc_assets.core.tables import TableId


class Op(str, Enum):
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__, 4.5 times the cost of a
# slotted one, and every row of the log phase builds one. Only a reader's assembler writes to one (`position`, at
# its transaction's commit), before handing it out.
@dataclass(slots=True)
class RowChange:
    table: TableId
    op: Op
    key: tuple  # primary-key values, in key order (from `after`, or `before` for a delete)
    after: dict | None  # None for a delete; may lack unchanged-TOAST columns
    before: dict | None = None  # old image when the log carries one
    position: Position | None = None  # where the event itself ends in the log (for per-split filtering)


class SchemaChangeKind(str, Enum):
    """What a schema change does to the row images, as the source that read it decides."""

    ADDED_COLUMNS = "added_columns"  # only new columns (`added`)
    RETYPED = "retyped"  # existing columns' definitions changed (`columns`), maybe columns added (`added`)
    # The table as a whole, none of its columns, and its changes keep coming: a PostgreSQL rename (the log names
    # the relation), a MySQL CREATE TABLE of a table that exists (IF NOT EXISTS, or a replay from before it was
    # created: re-creating it needs a DROP or RENAME first, which stop).
    TABLE_ONLY = "table_only"
    HARMLESS = "harmless"  # index, constraint, comment, table options...: every row image stays as it was
    # Anything else: with `columns`, confined to those existing columns (a drop, a rename); without, the table
    # itself (its key, a truncate, a drop) or a change the source cannot tell apart.
    OTHER = "other"


@dataclass(frozen=True)
class SchemaChange:
    """A DDL statement on a captured table (or one the reader cannot tell is harmless)."""

    table: TableId | None
    statement: str  # the source's words for it, for messages only: the engine decides on `kind`
    position: Position  # resume point after the statement
    kind: SchemaChangeKind = SchemaChangeKind.OTHER
    added: tuple[str, ...] = ()  # the names of the new columns, in statement order
    columns: tuple[str, ...] = ()  # the existing columns it changes (RETYPED, OTHER), by their old names
    renamed_to: TableId | None = None  # the table's name afterwards, where the change renames it


@dataclass(frozen=True)
class Transaction:
    """The changes of one committed transaction; `end` is the resume point after its commit."""

    changes: list[RowChange]
    end: Position
    commit_time: float | None = None  # seconds since the epoch, source clock, when the log says
    xid: int | None = None
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TransactionPart:
    """Changes of a transaction still being read, in log order, handed out once it outgrew the reader's bound
    so that no transaction is held whole. The final `Transaction` carries the rest, its end and commit time;
    a stream that ends before it leaves the transaction uncommitted (the parts count for nothing)."""

    changes: list[RowChange]
    floor: Position  # the transaction ends strictly after this position (its end is not known yet)


@dataclass(frozen=True)
class Idle:
    """Nothing new in the log for a while: lets the consumer checkpoint and notice a stop request."""

    position: Position | None = None  # the log end the reader knows of, if any
    flush: bool = False  # the reader reads on only once the target committed what it was handed: end the batch
