"""The relational sink: target tables, staging tables Spark writes into, the merge that makes a batch of splits
visible by replacing their rows (delete, then insert: idempotent), and the transaction the engine writes it in,
together with whatever else must commit with it (backfill, finished markers, checkpoint).
"""
from __future__ import annotations

import hashlib
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator

from cdc_assets.core.batches import MoveIncomplete, TableChanges
from cdc_assets.core.boundary import SPLIT_COLUMN, RowExport, SplitRanges, TargetFormat, Transport
from cdc_assets.core.fits import Capacity, capacity
from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.keys import order_agrees, range_predicate
from cdc_assets.core.move_source import MoveSource, move_source
from cdc_assets.core.positions import is_before
from cdc_assets.core.splits import KeyRange
from cdc_assets.core.tables import Column, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect, qualified, quote_ident
from cdc_assets.dbapi.jdbc import jdbc_for
from cdc_assets.dbapi.transaction import transaction
from cdc_assets.errors import REPLAN_HINT, TableError
from cdc_assets.sinks import range_read
from cdc_assets.sinks.image_sql import ImageSql
from cdc_assets.sinks.move_marks import MoveMarks, applied, newest, point_of
from cdc_assets.sinks.split_locks import SplitLocks


@dataclass(frozen=True)
class Moves:
    """How a batch's moves reach the target: copies of the old keys' rows inserted under the new keys, then the
    columns the log carried written over them like partial rows."""

    copies: dict[tuple, tuple]  # new key -> the old key's row, all columns in schema order, as `target_row` read it
    updates: dict[tuple, dict]  # new key -> the columns the log carried


def _superseded(move, replaying_until) -> bool:
    return (replaying_until is not None and move.position is not None
            and not is_before(replaying_until, move.position))


def staging_table(table: TableId, first_split: int) -> TableId:
    """Deterministic per table and first split, so a crashed run's staging table is replaced, not left to pile up;
    a hash of the whole name keeps long names that share a prefix apart within the 63-character limit."""
    digest = hashlib.sha256(str(table).encode()).hexdigest()[:10]
    return TableId(table.namespace, f"_cdc_stage_{table.name[:24]}_{digest}_{first_split}")


class SqlSink:
    """A `Sink` over SQL (MySQL, PostgreSQL); each engine fills in the hooks below."""

    db_type: str
    text_type: str  # unbounded text: a value carried as text, a document of the cdc_assets_meta tables
    meta_key_type: str  # a text key of the cdc_assets_meta tables (a task id, a table name), compared exactly
    supports_savepoints = True
    images: ImageSql  # its engine's before-image statements (sinks/image_sql.py)
    # Snapshot groups committing at once, each on its own connection. One here: InnoDB's range DELETE takes
    # next-key locks past the range's end, which a neighbouring group's INSERT would wait on (or deadlock).
    concurrent_commits = 1
    # Two splits per slot in a group (one Spark job): a core whose split ended early takes the group's next one
    # instead of idling until its slowest split ends (docs/benchmarks/snapshot.md, "Two splits per task slot").
    splits_per_slot = 2

    def __init__(self, url: DbUrl, source_db_type: str, write_batch_size: int = 50_000) -> None:
        self.url = url
        self.source_db_type = source_db_type  # its native declarations are kept only engine to same engine
        self.write_batch_size = write_batch_size  # rows per JDBC batch of a staging write
        self.conn = connect(url, autocommit=True)
        self._conn_guard = threading.RLock()  # see catalog
        self._commit_conns: dict[int, Any] = {}  # see _committer
        self._commit_lock = threading.Lock()
        self.move_marks = MoveMarks(self)
        self._capacities: dict[TableId, dict[str, Capacity | None]] = {}  # see column_capacities

    @contextmanager
    def catalog(self) -> Iterator[Any]:
        """A cursor on the sink's own autocommit connection (catalog reads, DDL), held by one thread at a time: the
        log phase checks the next batch against the catalog while the batch before applies on another thread, and
        both reach this connection; a connection shared by two threads at once breaks its protocol."""
        with self._conn_guard, self.conn.cursor() as cur:
            yield cur

    # -- hooks the engines fill in
    def target_format(self) -> TargetFormat:
        raise NotImplementedError

    def column_type(self, column: Column, in_key: bool) -> str:
        raise NotImplementedError

    def load_expr(self, t: Transport, staged: str) -> str:
        raise NotImplementedError

    def delete_staged_keys_sql(self, target: str, staging: str, key_match) -> str:
        """`key_match(target_ref, staging_ref)` renders the key equality between the two tables."""
        raise NotImplementedError

    def create_namespace_sql(self, namespace: str) -> str:
        raise NotImplementedError

    def relation_bytes(self, cursor, table: str, name: TableId) -> int:
        raise NotImplementedError

    def existing_columns(self, table: TableId) -> set[str] | None:
        raise NotImplementedError

    def alter_column_sql(self, table: TableId, column: Column) -> str:
        raise NotImplementedError

    def staging_prefix(self) -> str:
        return "CREATE TABLE"

    def check_key_columns(self, schema: TableSchema) -> None:
        """Refuse an existing target table whose key columns would merge keys the source keeps apart."""

    def prepare_changes(self, schema: TableSchema, changes: TableChanges) -> None:
        """Nothing to render ahead here (see PostgresSink); a batch with moves makes sure the move marks' table
        exists, outside the transaction that writes them."""
        if changes.moves:
            self.move_marks.ensure()

    def apply_changes(self, cursor, schema: TableSchema, changes: TableChanges) -> None:
        """Write a compacted batch of one table: deletes, full rows (replacing), and partial rows (updating only
        the columns they carry)."""
        raise NotImplementedError

    def parses_source_text(self) -> bool:
        return False

    def target_row(self, cursor, schema: TableSchema, key: tuple) -> tuple | None:
        """The target's row under `key`, every column in schema order, in a form the dialect writes back
        unchanged; None when there is none."""
        raise NotImplementedError

    def plan_moves(self, cursor, schema: TableSchema, changes: TableChanges) -> Moves:
        """Read, before the batch writes anything, the rows its moves come from (`core.move_source` decides which:
        the old key's row, or, when the target is past the move already, the new key's); a move whose unchanged
        columns neither key holds, or whose source the batch cannot tell, stops the batch."""
        copies: dict[tuple, tuple] = {}
        updates: dict[tuple, dict] = {}
        if not changes.moves:
            return Moves(copies, updates)
        marked = self.move_marks.ready  # its table made by prepare_changes (a backfill prepares nothing)
        mark = self.move_marks.read(cursor, schema.table) if marked else None
        for new, move in changes.moves.items():  # rare (key changes of rows with TOASTed values): two queries each
            row = self.target_row(cursor, schema, move.origin)
            refilled = move.origin != new and (move.origin in changes.rows or move.origin in changes.moves)
            source = move_source(origin_held=row is not None, new_held=self.target_row(cursor, schema, new) is not None,
                                 vacated=move.vacated, refilled=refilled,
                                 replaying=_superseded(move, changes.replaying_until),
                                 applied=applied(mark, point_of(move.position, changes.floor)),
                                 in_parts=changes.in_parts)
            if source is MoveSource.SUPERSEDED:
                continue
            if source in (MoveSource.LOST, MoveSource.AMBIGUOUS, MoveSource.REPLAYED_AWAY):
                raise self._move_error(schema, new, move, source, changes.floor)
            if source is MoveSource.ORIGIN:
                copies[new] = row
            updates[new] = move.columns
        points = [p for m in changes.moves.values() if (p := point_of(m.position, changes.floor)) is not None]
        after = newest(mark, points)
        if marked and after is not None and after != mark:
            self.move_marks.write(cursor, schema.table, after)
        return Moves(copies, updates)

    def _move_error(self, schema: TableSchema, new: tuple, move, source: MoveSource, floor) -> MoveIncomplete:
        missing = ", ".join(c.name for c in schema.columns if c.name not in move.columns)
        why = {MoveSource.LOST: "the target on {url} holds neither key",
               MoveSource.AMBIGUOUS: "the move is replayed over the snapshot (at or before its high watermarks) and "
               "the batch fills the old key again after it: the target's row under the old key on {url} may be the "
               "moved row or the later one",
               MoveSource.REPLAYED_AWAY: "the target on {url} applied the move before (a replay after a crash) but "
               "no longer holds the row under the new key"}[source]
        at = move.position if move.position is not None else f"the transaction committed after {floor}"
        return MoveIncomplete(
            f"cannot move the row of {schema.table} from key {move.origin} to {new} at {at}: the log "
            f"leaves out its unchanged column(s) {missing} and " + why.format(url=self.url),
            f"{REPLAN_HINT}; ALTER TABLE {schema.table} REPLICA IDENTITY FULL on the source makes the log carry "
            "whole rows")

    def add_column_sql(self, table: TableId, column: Column) -> str:
        return f"ALTER TABLE {self.table_sql(table)} ADD COLUMN {self.q(column.name)} {self.column_type(column, False)}"

    # -- shared behaviour
    def check_key_order(self, kind: str, source_db_type: str) -> bool:
        return order_agrees(kind, source_db_type, self.db_type)

    def split_locks(self, task_id: str) -> SplitLocks:
        return SplitLocks(self.url, task_id)

    def q(self, name: str) -> str:
        return quote_ident(self.db_type, name)

    def table_sql(self, table: TableId) -> str:
        return qualified(self.db_type, table.namespace, table.name)

    def jdbc(self) -> JdbcEndpoint:
        return jdbc_for(self.url, write=True)

    def column_capacities(self, table: TableId, fresh: bool = False) -> dict[str, Capacity | None]:
        """What each column of the target table holds, from its catalog: read once per table and sink (each run
        has its own sink, so a column the user altered is seen by the next run), or anew when `fresh`."""
        found = None if fresh else self._capacities.get(table)
        if found is None:
            with self.catalog() as cur:
                cur.execute("SELECT column_name, data_type, character_maximum_length, numeric_precision, "
                            f"numeric_scale, datetime_precision, {self.column_type_sql} FROM information_schema.columns "
                            "WHERE table_schema = %s AND table_name = %s", (table.namespace, table.name))
                found = {r[0]: capacity(*r[1:]) for r in cur.fetchall()}
            self._capacities[table] = found
        return found

    column_type_sql = "NULL"  # the catalog's full type text beside DATA_TYPE (MySQL: COLUMN_TYPE, for unsigned)

    def ensure_table(self, schema: TableSchema) -> bool:
        """Create the target table when missing (returns True); accept an existing one holding every column."""
        self._capacities.pop(schema.table, None)
        existing = self.existing_columns(schema.table)
        if existing is not None:
            missing = [c.name for c in schema.columns if c.name not in existing]
            if missing:
                raise TableError(
                    f"target table {schema.table} exists but lacks columns {missing} on {self.url}",
                    "add them, or drop the target table so it is created from the source")
            self.check_key_columns(schema)
            return False
        # NULL said out loud: MySQL with explicit_defaults_for_timestamp=OFF makes an unqualified TIMESTAMP
        # column NOT NULL DEFAULT CURRENT_TIMESTAMP, which would turn NULLs into the time of the write.
        cols = [f"{self.q(c.name)} {self.column_type(c, c.name in schema.primary_key)}"
                f"{' NOT NULL' if not c.nullable or c.name in schema.primary_key else ' NULL'}" for c in schema.columns]
        key = ", ".join(self.q(k) for k in schema.primary_key)
        with self.catalog() as cur:
            cur.execute(self.create_namespace_sql(schema.table.namespace))
            cur.execute(f"CREATE TABLE {self.table_sql(schema.table)} ({', '.join(cols)}, PRIMARY KEY ({key}))")
        return True

    def staging_table(self, table: TableId, first_split: int) -> TableId:
        return staging_table(table, first_split)

    def staging_columns(self, transports: tuple[Transport, ...], key: tuple[str, ...]) -> list[str]:
        # Key columns are declared as in the target table, so the delete-join compares keys by the target's rules.
        return [f"{self.q(t.column.name)} "
                f"{self.text_type if t.as_text else self.column_type(t.column, t.column.name in key)}"
                for t in transports]

    def create_staging(self, staging: TableId, export: RowExport, key: tuple[str, ...]) -> None:
        cols = [f"{self.q(SPLIT_COLUMN)} INTEGER NOT NULL"] + self.staging_columns(export.transports, key)
        with self.catalog() as cur:
            cur.execute(self.create_namespace_sql(staging.namespace))
            cur.execute(f"DROP TABLE IF EXISTS {self.table_sql(staging)}")
            cur.execute(f"{self.staging_prefix()} {self.table_sql(staging)} ({', '.join(cols)})")

    def _key_match(self, schema: TableSchema, transports: tuple[Transport, ...]) -> Callable[[str, str], str]:
        """`match(target_ref, staging_ref)` renders the key equality between the target and a staging table."""
        by_name = {t.column.name: t for t in transports}
        return lambda t_ref, s_ref: " AND ".join(
            f"{t_ref}.{self.q(k)} = {self.load_expr(by_name[k], f'{s_ref}.{self.q(k)}')}" for k in schema.primary_key)

    def range_sql(self, schema: TableSchema, replace: SplitRanges, ref: str | None = None) -> str:
        column = self.q(schema.split_column.name) if ref is None else f"{ref}.{self.q(schema.split_column.name)}"
        return " OR ".join(f"({range_predicate(column, r, replace.kind, self.db_type)})" for r in replace.ranges)

    def staged_bytes(self, staging: TableId) -> int:
        """The staging table's size on disk, read on the commit connection before its transaction."""
        with self._committer().cursor() as cur:
            return self.relation_bytes(cur, self.table_sql(staging), staging)

    def merge_staged(self, cursor, schema: TableSchema, staging: TableId, export: RowExport,
                     replace: SplitRanges, counts: dict[int, int] | None = None) -> dict[int, int]:
        """Replace the splits' key ranges in the target with the staged rows, through `cursor` (inside the
        caller's `transaction()`); the staged rows per split index: `counts` when the staging write counted them
        (each COPY task its split's: a scan of the staging table less on the commit, which paces the snapshot),
        else counted here.

        Where the target orders the key as the source does (`replace.by_range`), the ranges are deleted, then the
        staged rows inserted: rows the source deleted since an earlier read of the splits go too. Otherwise only
        the staged keys are replaced here, and the caller removes the rows the source no longer has
        (`unstaged_keys`). Against an empty target (a first snapshot) delete + plain insert is twice as fast as
        ON CONFLICT DO UPDATE."""
        stage_sql, target_sql, transports = self.table_sql(staging), self.table_sql(schema.table), export.transports
        names = ", ".join(self.q(t.column.name) for t in transports)
        loads = ", ".join(self.load_expr(t, f"s.{self.q(t.column.name)}") for t in transports)
        if counts is None:
            cursor.execute(f"SELECT {self.q(SPLIT_COLUMN)}, COUNT(*) FROM {stage_sql} GROUP BY {self.q(SPLIT_COLUMN)}")
            counts = {int(i): int(n) for i, n in cursor.fetchall()}
        if replace.by_range:
            cursor.execute(f"DELETE FROM {target_sql} WHERE {self.range_sql(schema, replace)}")
        else:
            cursor.execute(self.delete_staged_keys_sql(target_sql, stage_sql, self._key_match(schema, transports)))
        cursor.execute(f"INSERT INTO {target_sql} ({names}) SELECT {loads} FROM {stage_sql} s")
        return counts

    def drop_staging(self, staging: TableId) -> None:
        """After the merge committed, on the commit connection: MySQL's DROP TABLE would commit a transaction
        still open."""
        with self._committer().cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {self.table_sql(staging)}")

    def unstaged_keys(self, cursor, schema: TableSchema, staging: TableId, export: RowExport,
                      replace: SplitRanges) -> list[tuple]:
        """Keys the target holds in the splits' ranges, by the target's own order, that the group did not stage:
        rows the source deleted since an earlier read, or rows of other splits when the two orders differ."""
        keys = ", ".join(f"t.{self.q(k)}" for k in schema.primary_key)
        match = self._key_match(schema, export.transports)
        cursor.execute(f"SELECT {keys} FROM {self.table_sql(schema.table)} t WHERE ({self.range_sql(schema, replace, 't')}) "
                       f"AND NOT EXISTS (SELECT 1 FROM {self.table_sql(staging)} s WHERE {match('t', 's')})")
        return [tuple(row) for row in cursor.fetchall()]

    def transaction(self) -> ContextManager:
        """`with sink.transaction() as tx:` a cursor inside one transaction on the commit connection, committed
        when the block ends, rolled back when it raises. The engine writes a snapshot group's merge, backfill
        and finished markers, or a log batch and its checkpoint, through it."""
        return transaction(self._committer())

    def _committer(self):
        """The calling thread's commit connection, opened on its first use: the snapshot commits on threads of
        its own (`concurrent_commits`), beside the thread that creates staging tables on `conn`; everything else
        commits from one thread."""
        conn = self._commit_conns.get(threading.get_ident())
        if conn is None:
            with self._commit_lock:
                alive = {thread.ident for thread in threading.enumerate()}
                for ident in [i for i in self._commit_conns if i not in alive]:  # an earlier table's commit threads
                    self._commit_conns.pop(ident).close()
                conn = self._commit_conns[threading.get_ident()] = connect(self.url, autocommit=True)
        return conn

    def add_columns(self, schema: TableSchema, columns: list[Column]) -> None:
        self._capacities.pop(schema.table, None)
        existing = self.existing_columns(schema.table) or set()
        with self.catalog() as cur:
            for column in columns:
                if column.name not in existing:
                    cur.execute(self.add_column_sql(schema.table, column))

    def range_rows(self, schema: TableSchema, key_range: KeyRange, kind: str, source_db_type: str,
                   source_keys: list[tuple]) -> list[tuple]:
        return range_read.range_rows(self, schema, key_range, kind, source_db_type, source_keys)

    def close(self) -> None:
        self.conn.close()
        for conn in self._commit_conns.values():
            conn.close()
