"""The boundary between the engine and the databases: what a source offers the snapshot and the log phase, and
what a sink offers both, whatever the engine behind them (MySQL, PostgreSQL, MongoDB). The registry
(`engine/registry.py`) maps each `db_type` to its implementations; the engine sees only these protocols.

Rows cross the boundary in a format the *sink* names (`TargetFormat`) and the *source* produces (`RowExport`):
the source knows its values, the sink knows what its staging accepts, and neither knows the other's engine.
Spark runs the export and the staging write (`spark/staging.py`); the driver commits through `Sink.transaction()`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, ContextManager, Protocol

from cdc_assets.core.added_fill import AddedFill
from cdc_assets.core.batches import TableChanges
from cdc_assets.core.events import Idle, SchemaChange, Transaction, TransactionPart
from cdc_assets.core.fits import Capacity
from cdc_assets.core.headroom import Headroom
from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.positions import Position
from cdc_assets.core.splits import KeyRange, Split, SplitPlan
from cdc_assets.core.tables import Column, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import CdcError

SPLIT_COLUMN = "_cdc_split"  # the split index each exported row carries, first

LogItem = Transaction | TransactionPart | SchemaChange | Idle


# -- rows from a source to a sink's staging ------------------------------------------------------------------


class RowFormat(str, Enum):
    COPY_TEXT = "copy_text"  # one string column: the row as one PostgreSQL COPY text line, the split index first
    COLUMNS = "columns"  # `_cdc_split`, then one column per table column, typed or as text (see Transport)


@dataclass(frozen=True)
class TargetFormat:
    """What a sink's staging accepts: named by the sink, produced by the source."""

    db_type: str  # the target's engine, for the few renderings that depend on it (MySQL has no arrays)
    rows: RowFormat
    declared: Callable[[Column, bool], str]  # (column, in the key) -> the target's column type


@dataclass(frozen=True)
class Transport:
    """How one column travels from source to target: native through Spark, or as text the target parses."""

    column: Column
    as_text: bool


@dataclass(frozen=True)
class JdbcExport:
    """A group of splits as one JDBC query, one predicate (one Spark partition) per split. The query selects the
    split column too, outside the exported columns, because Spark filters the predicates outside the subquery."""

    endpoint: JdbcEndpoint
    query: str
    predicates: tuple[str, ...]


@dataclass(frozen=True)
class TaskExport:
    """A group of splits read inside Spark tasks by the source's own client (no JDBC driver, e.g. MongoDB): one
    task per entry of `tasks`; `read(task)` runs on an executor and yields tuples shaped by `schema`."""

    tasks: tuple[Any, ...]  # picklable: one per Spark task
    read: Callable[[Any], Iterator[tuple]]  # picklable: a module-level function or a functools.partial of one
    schema: str  # Spark DDL of the yielded tuples, e.g. "line string" or "_cdc_split int, a string, ..."


@dataclass(frozen=True)
class CopyOutExport:
    """A group of splits for a PostgreSQL target, each split read by a statement of its own that a Spark task pipes
    into the staging `COPY` (spark/copy_pipe.py): the rows never enter a JVM. A PostgreSQL source runs `COPY
    (SELECT ...) TO STDOUT` (psycopg2); a MySQL one a `SELECT` of the COPY line, read by the C client (mysqlclient).
    Each field is rendered as the JdbcExport's COPY line renders it, so the COPY text is the same bytes either way.
    Only into a `CopyWrite`."""

    # `client`'s connect(**connect_args) to the source; holds the password
    connect_args: dict = field(repr=False)
    statements: tuple[str, ...]  # one per split, in the group's order
    # The statements select the columns as they are, in COPY's binary format, which the staging COPY then reads
    # as binary too: only where every staging column has the source column's own built-in type.
    binary: bool = False
    client: str = "postgres"  # "postgres": each statement is a COPY TO; "mysql": a SELECT of one COPY line per row
    predicates: tuple[str, ...] = ()  # each split's range on the source, where the source explains failures by it


@dataclass(frozen=True)
class RowExport:
    """How a group of splits leaves the source, in the format the target asked for."""

    format: RowFormat
    how: JdbcExport | TaskExport | CopyOutExport
    transports: tuple[Transport, ...]  # per table column, in schema order
    # Several exports sharing one read (one `how`, several targets): the columns of the read that are this
    # export's rows, in order. Empty: every column, the read is this export's alone.
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class JdbcWrite:
    """Staged through Spark's JDBC writer (typed columns, batched inserts)."""

    endpoint: JdbcEndpoint
    table: str  # quoted, qualified staging table
    batch_size: int


@dataclass(frozen=True)
class CopyWrite:
    """Staged by `COPY ... FROM STDIN` from each Spark partition's Arrow batches (COPY_TEXT rows)."""

    connect_args: dict = field(repr=False)  # psycopg2.connect(**connect_args); holds the password
    copy_sql: str


@dataclass(frozen=True)
class TaskWrite:
    """Staged by the sink's own client inside Spark tasks: `write(rows)` consumes one partition's rows (tuples in
    the export's shape) and returns how many it wrote. Picklable."""

    write: Callable[[Iterator[tuple]], int]


@dataclass(frozen=True)
class SplitRanges:
    """What a group's commit replaces: the key ranges of its splits on the split column. `by_range`: the target
    orders this key kind exactly as the source does, so it can judge the ranges itself."""

    kind: str
    ranges: tuple[KeyRange, ...]
    by_range: bool


@dataclass(frozen=True)
class KeyStats:
    min: Any
    max: Any
    rows: int  # estimate from statistics, exact when statistics are missing


# -- the protocols -------------------------------------------------------------------------------------------


class SnapshotSource(Protocol):
    db_type: str

    def check_capture(self) -> list[str]:
        """Raise SourceSetupError when the server cannot be captured (binlog off, wal_level, not a replica set);
        return notes for the plan output (log retention, warnings)."""

    def describe(self, table: TableId, split_column: str | None = None) -> TableSchema: ...

    def added_fill(self, change: SchemaChange, names: list[str], before: TableSchema) -> AddedFill:
        """What the rows there before `change` (which added the columns `names`) got in them (core/added_fill);
        `before`: the definitions the task had, as it read them."""

    def current_position(self) -> Position: ...

    def plan(self, schema: TableSchema, split_size: int) -> SplitPlan:
        """Split the table's key space into ranges of about `split_size` rows (planned_at left for the engine)."""

    def export(self, plan: SplitPlan, schema: TableSchema, splits: list[Split], target: TargetFormat) -> RowExport:
        """How the splits' rows leave this source for `target`; the source decides which split a key is in."""

    def export_together(self, plan: SplitPlan, schema: TableSchema, splits: list[Split],
                        targets: list[TargetFormat]) -> list[RowExport]:
        """One export per target, sharing one read wherever the source can select every format at once (exports
        with the same `how` are one read); targets of one engine share one format."""

    def pipes_copy(self, target: TargetFormat) -> bool:
        """Whether `export` pipes each split straight into `target`'s staging `COPY` (spark/copy_pipe.py), so that
        the snapshot reads nothing through Spark JDBC; False for a source without such a pipe."""

    def jdbc_endpoint(self) -> JdbcEndpoint | None:
        """Where Spark's JDBC reader reads this source's snapshot (the session's warm-up checks its login there);
        None for a source whose splits Spark tasks read with its own client (MongoDB)."""

    def explain_failure(self, schema: TableSchema, export: RowExport, error: Exception) -> CdcError | None:
        """What the source can say about a failed export (the row and column a target refused), or None."""

    def present_keys(self, schema: TableSchema, keys: list[tuple]) -> set[tuple]:
        """Which of `keys` the source holds now, compared exactly (byte for byte, not by collation)."""

    # Whether each row carries a version that changes with every write (PostgreSQL's xmin): then `changed_since`
    # tells what changed around a `read_split`; otherwise the log does (engine/verify_window.py).
    row_versions: bool

    def read_split(self, schema: TableSchema, key_range: KeyRange, kind: str, target: TargetFormat,
                   rows_per_second: int = 0) -> Any:
        """The range's rows as `target` compares them (`.rows`), read without a lock: one consistent view,
        fetched at no more than `rows_per_second` (0: no limit)."""

    def changed_since(self, schema: TableSchema, key_range: KeyRange, kind: str, target: TargetFormat,
                      read: Any, rows_per_second: int = 0) -> set[tuple]:
        """With `row_versions`: the keys whose row changed (updated, deleted, inserted) since `read`, their
        versions fetched at no more than `rows_per_second` (0: no limit)."""

    def hold_split(self, schema: TableSchema, key_range: KeyRange, kind: str, target: TargetFormat | None = None,
                   lock_wait_secs: float = ...) -> ContextManager[Any]:
        """Hold the range still (no transaction can change a row of it) until the block ends; the held object's
        `rows` are the range's rows read under the hold, each column as `target` compares it (None: the key).
        Raises SourceBusy when the hold is not granted within `lock_wait_secs` or loses a deadlock."""

    def close(self) -> None: ...


class LogReader(Protocol):
    def read(self, start: Position, stop_at: Position | None = None, part_events: int | None = None
             ) -> Iterator[LogItem]:
        """Yield what committed after `start`, in commit order: Transactions of the captured tables (with
        `part_events`, a big one comes first as TransactionParts of that many changes), SchemaChanges of captured
        tables, and Idle(boundary) when quiet. With `stop_at`, return once the log reached it, the last boundary
        reported as Idle; without it, read until `close()`. Raises PositionLost when `start` is gone."""

    def acknowledge(self, position: Position) -> None:
        """The target holds everything up to `position`: the source may release the log before it."""

    def close(self) -> None: ...


class Log(Protocol):
    def prepare(self, tables: list[TableId], replan: bool = False) -> Position | None:
        """Make the source keep its log from now on for these tables (a slot, a publication); before any watermark."""

    def reader(self, schemas: dict[TableId, TableSchema], purpose: str = "sync",
               source_text: bool = False) -> LogReader:
        """A reader of the captured tables; `purpose` tells concurrent readers apart (sync, one per backfill).
        With `source_text` (every sink `parses_source_text`), a value outside the key may stay the source's own
        text of it where the log carries one (PostgreSQL); keys are always the values the snapshot reads."""

    def earliest(self) -> Position: ...

    def position_at(self, when: datetime) -> Position: ...

    distance_unit: str  # what `distance` counts: "bytes" of binlog/WAL, or "s" of cluster time (MongoDB)

    def distance(self, a: Position, b: Position) -> int:
        """How far `b` is past `a` in `distance_unit`, 0 when `b` is not after `a`."""

    def headroom(self, needed: Position | None) -> Headroom:
        """How close the log kept for `needed` (None: nothing needed yet) is to being released (core/headroom.py)."""


class SplitLeases(Protocol):
    """One run at a time snapshots a split: leases held from before a group's low watermark until its commit
    settled, released when their holder dies (a SIGKILLed run never leaves a split leased)."""

    def acquire(self, split_ids: list[str], timeout: float) -> None:
        """Take every lease, waiting up to `timeout` seconds for each one another run holds (SplitBusy after)."""

    def release(self, split_ids: list[str]) -> None: ...

    def close(self) -> None: ...


class Sink(Protocol):
    """A target. Every write that makes rows visible goes through `transaction()`; the engine adds whatever must
    commit with it (backfill, finished markers, checkpoint) through the same `tx`."""

    db_type: str
    url: DbUrl
    concurrent_commits: int  # snapshot groups that may commit at once (each on a connection of its own)
    splits_per_slot: int  # a snapshot group's splits per task the Spark session runs at once
    # Whether savepoints can keep their records and before-images in this target (sinks/before_images.py, through
    # the SQL sink's `images`); a target without them refuses `savepoint create` and is never imaged.
    supports_savepoints: bool
    # Whether a repair can hold the split's range in this target (`repair_transaction`, `keep_rows`) instead of
    # on the source (engine/repair.py).
    repairs_lock_free: bool

    def target_format(self) -> TargetFormat: ...

    def check_key_order(self, kind: str, source_db_type: str) -> bool:
        """Whether this target orders keys of `kind` exactly as that source does (it can then judge split ranges)."""

    def ensure_table(self, schema: TableSchema, follow: bool = False) -> bool:
        """Create the target table when missing (True); accept an existing one that can hold every column;
        `follow` (a re-plan): add the columns it lacks, as the source added or renamed them since."""

    def add_columns(self, schema: TableSchema, columns: list[Column], defaults: dict[str, str] | None = None) -> None:
        """Add `columns` the table lacks; `defaults`: the constant default (an SQL literal) of some, which the
        rows there already get, as the source's rows got it from its ADD COLUMN."""

    def column_capacities(self, table: TableId, fresh: bool = False) -> dict[str, Capacity | None]:
        """What each column of the target table holds (core/fits.py), as its catalog said at the first call
        (or says now, with `fresh`: the log's values are then cast to what it says now); {} for a target
        without declared columns."""

    def alter_column_sql(self, table: TableId, column: Column, in_key: bool = False) -> str:
        """The statement that makes the target column hold `column`'s values (advice in messages, and what a
        re-plan runs)."""

    def staging_table(self, table: TableId, first_split: int) -> TableId: ...

    def create_staging(self, staging: TableId, export: RowExport, key: tuple[str, ...]) -> None: ...

    def staging_write(self, staging: TableId, export: RowExport) -> JdbcWrite | CopyWrite | TaskWrite: ...

    def staged_bytes(self, staging: TableId) -> int: ...

    def transaction(self) -> ContextManager[Any]: ...

    def merge_staged(self, tx: Any, schema: TableSchema, staging: TableId, export: RowExport,
                     replace: SplitRanges, counts: dict[int, int] | None = None) -> dict[int, int]:
        """Replace the splits' ranges with the staged rows inside `tx`; the staged rows per split index (`counts`:
        as the staging write counted them, else counted from the staging table)."""

    def unstaged_keys(self, tx: Any, schema: TableSchema, staging: TableId, export: RowExport,
                      replace: SplitRanges) -> list[tuple]: ...

    def drop_staging(self, staging: TableId) -> None: ...

    def split_locks(self, task_id: str) -> SplitLeases:
        """The split leases of this task, kept where both runs would write: in the target."""

    def prepare_changes(self, schema: TableSchema, changes: TableChanges) -> None:
        """Whatever of writing `changes` needs no target (rendering), kept on them for `apply_changes`: the engine
        calls it while the target still applies the batch before."""

    def apply_changes(self, tx: Any, schema: TableSchema, changes: TableChanges) -> None: ...

    def parses_source_text(self) -> bool:
        """Whether `apply_changes` takes a value outside the key as the source's own text of it (the log's text
        of a PostgreSQL value, into a PostgreSQL column declared as in the source): the column's type then
        parses it to the same value, and the log reader need not build a Python value from it."""

    def range_rows(self, schema: TableSchema, key_range: KeyRange, kind: str, source_db_type: str,
                   source_keys: list[tuple]) -> list[tuple]:
        """The target's rows of a split's range for verification, plus the source's keys it orders elsewhere."""

    def repair_transaction(self, schema: TableSchema, ranges: SplitRanges) -> ContextManager[Any]:
        """A transaction that first holds the ranges still against the target's other writers (the sync)."""

    def keep_rows(self, tx: Any, schema: TableSchema, keys: set[tuple], ranges: SplitRanges) -> Any:
        """The target's rows of `keys` in `ranges`, copied aside inside `tx`; `.put_back(tx)` restores them."""

    def close(self) -> None: ...
