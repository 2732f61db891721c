"""MySQL/MariaDB as a target: type mapping, key collations, staging (JDBC inserts, a row id of its own), and log
batches applied by `mysql_apply.py`."""
from __future__ import annotations

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.boundary import JdbcWrite, RowExport, RowFormat, TargetFormat, Transport
from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.mysql_flavour import MysqlFlavour, detect_on
from cdc_assets.errors import TableError
from cdc_assets.sinks.base import SqlSink
from cdc_assets.sinks.image_sql import MysqlImageSql
from cdc_assets.sinks.mysql_apply import MysqlBatches

STAGING_ROW = "_cdc_row"

_FROM_POSTGRES = {
    Kind.BOOL: "tinyint(1)", Kind.FLOAT32: "float", Kind.FLOAT64: "double", Kind.BINARY: "longblob",
    Kind.DATE: "date", Kind.JSON: "json", Kind.UUID: "char(36)", Kind.ARRAY: "json", Kind.ENUM: "text",
    Kind.INTERVAL: "varchar(255)", Kind.OTHER: "longtext",
}
_INTS = {16: "smallint", 32: "int", 64: "bigint"}


class MysqlSink(SqlSink):
    db_type = "mysql"
    text_type = "LONGTEXT"
    column_type_sql = "COLUMN_TYPE"
    images = MysqlImageSql()

    def __init__(self, url: DbUrl, source_db_type: str, write_batch_size: int = 50_000) -> None:
        super().__init__(url, source_db_type, write_batch_size)
        with self.catalog() as cur:
            self.flavour: MysqlFlavour = detect_on(cur)
        self.batches = MysqlBatches(self)

    def target_format(self) -> TargetFormat:
        """Typed columns: Spark's JDBC writer batches them into multi-row inserts (rewriteBatchedStatements)."""
        return TargetFormat(self.db_type, RowFormat.COLUMNS, self.column_type)

    def staging_write(self, staging: TableId, export: RowExport) -> JdbcWrite:
        return JdbcWrite(self.jdbc(), self.table_sql(staging), self.write_batch_size)

    def column_type(self, column: Column, in_key: bool) -> str:
        if self.source_db_type == "mysql":
            # MariaDB reports JSON as longtext; declaring json restores its validity check.
            declared = "json" if column.kind == Kind.JSON else column.native
        else:
            declared = kind_to_mysql(column)
            # MySQL cannot index unbounded TEXT/BLOB: key columns get the longest indexable form.
            if in_key and declared in ("longtext", "text"):
                declared = "varchar(768)"
            if in_key and declared == "longblob":
                declared = "varbinary(3072)"
        if in_key and _is_text(column, declared):
            # A case/accent-insensitive or PAD SPACE key would take 'abc'/'ABC', 'e'/'é', 'x'/'x ' for one key.
            declared += f" CHARACTER SET utf8mb4 COLLATE {self.key_collation}"
        return declared

    @property
    def key_collation(self) -> str:
        """Binary and NO PAD: MySQL 8's utf8mb4_0900_bin, MariaDB's utf8mb4_nopad_bin (utf8mb4_bin pads)."""
        return self.flavour.nopad_binary_collation

    @property
    def meta_key_type(self) -> str:
        return f"VARCHAR(255) CHARACTER SET utf8mb4 COLLATE {self.key_collation}"

    def staging_columns(self, transports: tuple[Transport, ...], key: tuple[str, ...]) -> list[str]:
        """A primary key of its own, so that sql_require_primary_key (MySQL) and innodb_force_primary_key
        (MariaDB) accept the table and sql_generate_invisible_primary_key adds none; Spark's insert names its
        columns, so the row id fills itself. Text-carried key columns compare in the key's collation: against a
        database default such as utf8mb4_0900_ai_ci they would match 'a', 'A' and 'á' alike."""
        return [f"{self.q(STAGING_ROW)} BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY"] + [
            f"{self.q(t.column.name)} {self._staged_type(t, t.column.name in key)}" for t in transports]

    def _staged_type(self, t: Transport, in_key: bool) -> str:
        if not t.as_text:
            return self.column_type(t.column, in_key)
        return f"{self.text_type} CHARACTER SET utf8mb4 COLLATE {self.key_collation}" if in_key else self.text_type

    def check_key_columns(self, schema: TableSchema) -> None:
        with self.catalog() as cur:
            if self.flavour.generates_invisible_primary_keys:  # a hidden my_row_id would pass for no primary key
                cur.execute("SET SESSION show_gipk_in_create_table_and_information_schema = ON")
            cur.execute("SELECT COLUMN_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
                        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (schema.table.namespace, schema.table.name))
            collations = dict(cur.fetchall())
            cur.execute("SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
                        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0",
                        (schema.table.namespace, schema.table.name))
            unique: dict[str, set[str]] = {}
            for index, column in cur.fetchall():
                unique.setdefault(index, set()).add(column)
        self._check_key_index(schema, unique)
        for column in schema.columns:
            if column.name not in schema.primary_key or not _is_text(column, self.column_type(column, False)):
                continue
            have = collations.get(column.name)
            if have in (self.key_collation, column.collation) or have is None:
                continue  # binary NO PAD, or exactly how the source compares the key
            raise TableError(
                f"key column '{column.name}' of target table {schema.table} on {self.url} has collation {have}, which "
                "takes keys the source keeps apart (case, accents or trailing spaces) for one key",
                f"ALTER TABLE {self.table_sql(schema.table)} MODIFY {self.q(column.name)} "
                f"{self.column_type(column, True)} NOT NULL, or drop the target table so it is created from the source")

    def _check_key_index(self, schema: TableSchema, unique: dict[str, set[str]]) -> None:
        """A table whose primary key is a column of its own (MySQL's generated invisible `my_row_id`, a surrogate
        id) and no unique index on the source's key: every delete by key would scan the table, and nothing would
        keep a key from being written twice. Extra columns are fine otherwise: every insert names its columns."""
        key, ours = set(schema.primary_key), {c.name for c in schema.columns}
        primary = unique.get("PRIMARY", set())
        if key in unique.values() or primary <= ours:
            return
        raise TableError(
            f"target table {schema.table} on {self.url} has the primary key ({', '.join(sorted(primary))}), not the "
            f"source's key, and no unique index on the source's key ({', '.join(schema.primary_key)})",
            f"ALTER TABLE {self.table_sql(schema.table)} ADD UNIQUE KEY "
            f"({', '.join(self.q(k) for k in schema.primary_key)}), or drop the target table so it is created from "
            "the source")

    def load_expr(self, t: Transport, staged: str) -> str:
        if t.as_text and t.column.kind == Kind.BIT and self.column_type(t.column, False).startswith("bit"):
            return f"CAST(CONV({staged}, 2, 10) AS UNSIGNED)"  # a bit string, not its characters' bytes
        return staged  # MySQL parses text into temporal, JSON, ENUM/SET and DECIMAL columns on insert

    def delete_staged_keys_sql(self, target: str, staging: str, key_match) -> str:
        # MariaDB cannot resolve aliases in a multi-table DELETE without a default database: no aliases.
        return f"DELETE {target} FROM {target} JOIN {staging} ON {key_match(target, staging)}"

    def create_namespace_sql(self, namespace: str) -> str:
        return f"CREATE DATABASE IF NOT EXISTS {self.q(namespace)} CHARACTER SET utf8mb4"

    def apply_changes(self, cursor, schema: TableSchema, changes: TableChanges) -> None:
        self.batches.apply(cursor, schema, changes)

    def relation_bytes(self, cursor, table: str, name: TableId) -> int:
        cursor.execute("SELECT COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0) FROM information_schema.TABLES "
                       "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (name.namespace, name.name))
        row = cursor.fetchone()
        return int(row[0]) if row else 0

    def alter_column_sql(self, table: TableId, column: Column, in_key: bool = False) -> str:
        # MODIFY restates the whole column: without NOT NULL it would make a NOT NULL column nullable
        null = " NOT NULL" if in_key or not column.nullable else ""
        return f"ALTER TABLE {self.table_sql(table)} MODIFY {self.q(column.name)} {self.column_type(column, in_key)}{null}"

    def existing_columns(self, table: TableId) -> set[str] | None:
        with self.catalog() as cur:
            cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                        (table.namespace, table.name))
            names = {r[0] for r in cur.fetchall()}
        return names or None



_TEXT_TYPES = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext")


def _is_text(column: Column, declared: str) -> bool:
    """Text compared by a collation in the target: the source's strings, and PostgreSQL enums, which land in text
    columns here ('a' and 'A' are two labels). Not UUIDs: PostgreSQL writes them in one canonical lowercase form."""
    return column.kind == Kind.STRING or (column.kind != Kind.UUID and declared.split("(")[0] in _TEXT_TYPES)


def kind_to_mysql(column: Column) -> str:
    """The MySQL type of a column from another engine, from its logical kind (and size, precision, scale): a
    native declaration is used only between two MySQL servers."""
    kind = column.kind
    if kind == Kind.INT:
        return _INTS[column.bits or 64]
    if kind == Kind.DECIMAL:
        # MySQL caps DECIMAL at (65,30); unconstrained PostgreSQL numeric gets the widest it has (docs/connectors/postgres.md, "Type mapping": lossy).
        if column.precision is None or column.precision > 65 or (column.scale or 0) > 30:
            return "decimal(65,30)"
        return f"decimal({column.precision},{column.scale})"
    if kind == Kind.STRING:
        if column.length is not None:
            base = "char" if column.native.startswith("character(") else "varchar"
            return f"{base}({column.length})"
        return "longtext"
    if kind in (Kind.DATETIME, Kind.TIMESTAMP):
        # DATETIME, not TIMESTAMP: MySQL TIMESTAMP ends in 2038. Instants are stored as their UTC wall clock.
        return f"datetime({min(column.precision or 0, 6)})"
    if kind == Kind.TIME:
        return f"time({min(column.precision or 0, 6)})"
    if kind == Kind.BIT:
        return f"bit({column.length})" if column.length and column.length <= 64 else "varchar(255)"
    return _FROM_POSTGRES[kind]
