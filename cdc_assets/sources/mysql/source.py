"""MySQL/MariaDB as a snapshot source: capture checks, table discovery (describe.py), key statistics, binlog
position, the snapshot's select expressions and COPY lines, and what a failed export can be explained by."""
from __future__ import annotations

import importlib.util

import pymysql

from cdc_assets.core.added_fill import AddedFill
from cdc_assets.core.boundary import CopyOutExport, JdbcExport, KeyStats, RowExport, RowFormat, TargetFormat, Transport
from cdc_assets.core.events import SchemaChange
from cdc_assets.core.jdbc import JdbcEndpoint
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.splits import Split, SplitPlan
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect, mysqlclient_args
from cdc_assets.dbapi.jdbc import mysql_jdbc
from cdc_assets.dbapi.mysql_flavour import detect
from cdc_assets.errors import CdcError, NulInText, SourceSetupError
from cdc_assets.sources.base import SqlSource
from cdc_assets.sources.mysql import capture, types
from cdc_assets.sources.mysql.added_fill import added_fill
from cdc_assets.sources.mysql.describe import describe_table
from cdc_assets.sources.mysql.log_end import log_end
from cdc_assets.sources.split_planning import KeyProbes

ER_NO_PRIVILEGE = {1045, 1142, 1227}  # access denied: privilege (SUPER / SLAVE MONITOR / REPLICATION CLIENT)


class MysqlSource(SqlSource):
    db_type = "mysql"

    def __init__(self, url: DbUrl, pipe: bool = True) -> None:
        """`pipe`: a PostgreSQL target's splits may be piped (`export`, `pipes_copy`)."""
        self.url = url
        self.conn = connect(url, database="")
        self.flavour = detect(self.conn)
        self.probes = KeyProbes(self.conn, self.db_type)
        # The C client's login for the pipe: on MariaDB, with mysqlclient installed, on a login it was tested with
        # (mysqlclient_args). MySQL 8 stays on JDBC: no MySQL 8 server runs here to try the C client's logins on.
        self._pipe_args = (mysqlclient_args(url) if pipe and self.flavour.mariadb
                           and importlib.util.find_spec("MySQLdb") is not None else None)

    def check_capture(self) -> list[str]:
        """Refuse a server whose binlog cannot be captured (see sources/mysql/capture.py); return what the plan
        reports about it: binlog retention, and warnings."""
        names = ", ".join(f"'{n}'" for n in capture.VARIABLES)
        with self.conn.cursor() as cur:
            cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
            variables = {name: value for name, value in cur.fetchall()}
        replica, unknown = self._is_replica()
        result = capture.check(self.flavour, variables, replica, f"{self.url} ({self.flavour})")
        if result.problems:
            raise SourceSetupError("the binlog cannot be captured: " + "; ".join(result.problems),
                                   "change those settings in the server config (SET PERSIST on MySQL 8) and plan again")
        return result.notes + ([unknown] if unknown else [])

    def _is_replica(self) -> tuple[bool, str]:
        """(is it a replica, a note when that cannot be told). MariaDB >= 10.5 shows replica status only with
        SLAVE MONITOR, which REPLICATION CLIENT (its BINLOG MONITOR) does not include."""
        try:
            with self.conn.cursor(pymysql.cursors.DictCursor) as cur:
                cur.execute(self.flavour.replica_status_sql)
                row = cur.fetchone()
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] in ER_NO_PRIVILEGE:
                return False, (f"cannot tell whether {self.url} is a replica ({self.flavour.replica_status_sql} "
                               f"needs another privilege): if it is, {self.flavour.log_replica_updates_variable} "
                               "must be ON")
            raise
        return bool(row and (row.get("Source_Host") or row.get("Master_Host"))), ""

    def added_fill(self, change: SchemaChange, names: list[str], before: TableSchema) -> AddedFill:
        with self.conn.cursor() as cur:  # the server's setting now: the session's at the ADD is not in the binlog
            cur.execute("SELECT @@GLOBAL.explicit_defaults_for_timestamp")
            explicit = bool(int(cur.fetchone()[0]))
        return added_fill(change.statement, names, explicit)

    def describe(self, table: TableId, split_column: str | None = None) -> TableSchema:
        return describe_table(self.conn, self.url, self.flavour.mariadb, table, split_column)

    def export(self, plan: SplitPlan, schema: TableSchema, splits: list[Split], target: TargetFormat) -> RowExport:
        """A PostgreSQL target (`pipes_copy`): one `SELECT` of the JDBC export's COPY line per split, which a Spark
        task reads with the C client and pipes into the staging COPY (spark/copy_pipe.py). Otherwise the JDBC
        export."""
        if not self.pipes_copy(target):
            return super().export(plan, schema, splits, target)
        table = self.table_sql(schema.table)
        declared = lambda c: target.declared(c, c.name in schema.primary_key)  # noqa: E731
        predicates = self.split_predicates(plan, splits)
        statements = tuple(f"SELECT {self.copy_line(list(schema.columns), str(s.index), declared)} FROM {table} "
                           f"WHERE {p}" for s, p in zip(splits, predicates))
        transports = tuple(Transport(c, as_text=False) for c in schema.columns)  # staged in the target's types
        how = CopyOutExport(self._pipe_args, statements, client="mysql", predicates=predicates)
        return RowExport(target.rows, how, transports)

    def pipes_copy(self, target: TargetFormat) -> bool:
        """Whether `export` pipes each split into a PostgreSQL target's staging COPY (no Spark JDBC read)."""
        return self._pipe_args is not None and target.rows == RowFormat.COPY_TEXT and target.db_type == "postgres"

    def explain_failure(self, schema: TableSchema, export: RowExport, error: Exception) -> CdcError | None:
        """PostgreSQL's COPY refuses a text holding NUL with an encoding error naming neither row nor column: the
        source finds them."""
        how = export.how
        if export.format != RowFormat.COPY_TEXT or "0x00" not in str(error) or not isinstance(how, (JdbcExport,
                                                                                                  CopyOutExport)):
            return None
        found = self.text_with_nul(schema, list(how.predicates))
        return NulInText(schema.table, *found) if found else None

    def text_with_nul(self, schema: TableSchema, predicates: list[str]) -> tuple[tuple, str] | None:
        """(key, column) of a row in the predicates' ranges whose text holds NUL, which PostgreSQL cannot store."""
        keys = ", ".join(self.quote(k) for k in schema.primary_key)
        ranges = " OR ".join(f"({p})" for p in predicates)
        for column in schema.columns:
            if column.kind in (Kind.STRING, Kind.ENUM, Kind.SET):
                nul = f"LOCATE(X'00', CAST(CONVERT({self.quote(column.name)} USING utf8mb4) AS BINARY)) > 0"
                with self.conn.cursor() as cur:
                    cur.execute(f"SELECT {keys} FROM {self.table_sql(schema.table)} WHERE ({ranges}) AND {nul} LIMIT 1")
                    row = cur.fetchone()
                if row is not None:
                    return tuple(row), column.name
        return None

    def current_position(self) -> MysqlPosition:
        """The log end, with the server's identity and the GTID set logged up to it (sources/mysql/log_end.py).

        MySQL: the status statement's own Executed_Gtid_Set column (5th), read in the same statement as the
        file/offset; the server reads the set first (rpl_source.cc show_master_status), so a commit racing it
        can only make the set smaller than the offset's: a GTID resume then replays, never skips. MariaDB: the
        offset read between two equal reads of its GTID state, or BINLOG_GTID_POS at the offset."""
        with self.conn.cursor() as cur:
            end = log_end(cur, self.flavour)
            if end is None:
                raise SourceSetupError(f"{self.flavour.binlog_status_sql} returned nothing on {self.url} "
                                       f"({self.flavour})", "enable the binlog (--log-bin)")
            file, pos, gtid = end
            cur.execute(self.flavour.server_identity_sql)
            server = str(cur.fetchone()[0])
        return MysqlPosition(file, pos, gtid.replace("\n", ""), server)

    def key_stats(self, schema: TableSchema, kind: str) -> KeyStats:
        lo, hi = self.probes.min_max(schema, kind)
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (schema.table.namespace, schema.table.name))
            estimate = int(cur.fetchone()[0] or 0)
        # InnoDB's estimate can be 0 for a freshly loaded table; count when it says nothing useful.
        rows = estimate if estimate > 0 else self.probes.count(schema.table)
        return KeyStats(lo, hi, rows)

    def jdbc(self) -> JdbcEndpoint:
        return mysql_jdbc(self.url, database="", write=False)

    def select_expr(self, column: Column, target_db_type: str) -> tuple[str, bool]:
        return types.select_expr(column, self.quote(column.name))

    def compared_columns(self, schema: TableSchema, target: TargetFormat) -> list[str]:
        return [types.compared_expr(c, self.quote(c.name)) for c in schema.columns]

    def copy_line(self, columns: list[Column], tag_sql: str, declared) -> str:
        return types.copy_line([f"({tag_sql})"] + [types.copy_field(c, self.quote(c.name), declared(c),
                                                                    self.flavour.mariadb) for c in columns])

    def exact_key(self, column: Column) -> bool:
        return column.kind in (Kind.STRING, Kind.ENUM)  # BINARY: no collation, no PAD SPACE

    def close(self) -> None:
        self.conn.close()

