"""A SQL sink's target tables: created from the source's schema when missing, accepted when they hold every
column, following the columns the source adds, and what each column holds as the catalog declares it."""
from __future__ import annotations

import logging

from cdc_assets.core.fits import Capacity, capacity, narrower
from cdc_assets.core.tables import Column, TableId, TableSchema
from cdc_assets.errors import TableError

log = logging.getLogger("cdc_assets.sink")


class TargetTables:
    """The DDL and catalog reads of one sink's tables, in the dialect `sink` declares (`q`, `column_type`,
    `create_namespace_sql`, `existing_columns`, `check_key_columns`, `column_type_sql`), through its `catalog()`."""

    def __init__(self, sink) -> None:
        self.sink = sink
        self._capacities: dict[TableId, dict[str, Capacity | None]] = {}  # see capacities

    def ensure(self, schema: TableSchema, follow: bool = False) -> bool:
        """Create the target table when missing (returns True); accept an existing one holding every column;
        `follow` (a re-plan, the way out of a column renamed, retyped or left out): add the payload columns it
        lacks, and make those too narrow for the source's current definitions hold them."""
        sink = self.sink
        self._capacities.pop(schema.table, None)
        existing = sink.existing_columns(schema.table)
        if existing is not None:
            missing = [c.name for c in schema.columns if c.name not in existing]
            lacking = [c for c in schema.columns if c.name in missing and c.name not in schema.primary_key]
            if follow and lacking and len(lacking) == len(missing):
                self.add_columns(schema, lacking)
                missing = []
            if missing:
                raise TableError(
                    f"target table {schema.table} exists but lacks columns {missing} on {sink.url}",
                    "add them, or drop the target table so it is created from the source")
            if follow:
                self._hold_source_types(schema)
            sink.check_key_columns(schema)
            return False
        # NULL said out loud: MySQL with explicit_defaults_for_timestamp=OFF makes an unqualified TIMESTAMP
        # column NOT NULL DEFAULT CURRENT_TIMESTAMP, which would turn NULLs into the time of the write.
        cols = [f"{sink.q(c.name)} {sink.column_type(c, c.name in schema.primary_key)}"
                f"{' NOT NULL' if not c.nullable or c.name in schema.primary_key else ' NULL'}" for c in schema.columns]
        key = ", ".join(sink.q(k) for k in schema.primary_key)
        with sink.catalog() as cur:
            cur.execute(sink.create_namespace_sql(schema.table.namespace))
            cur.execute(f"CREATE TABLE {sink.table_sql(schema.table)} ({', '.join(cols)}, PRIMARY KEY ({key}))")
        return True

    def _hold_source_types(self, schema: TableSchema) -> None:
        """Alter each target column that does not hold every value of the source column (`holds`) to the type the
        sink declares for it: a re-plan reads every row again, and a column the source widened since the target
        table was made would refuse the new snapshot's longer values. Types fits.py does not model are left as
        they are: the server refuses a value they cannot take, it never cuts one."""
        sink = self.sink
        capacities = self.capacities(schema.table, fresh=True)
        with sink.catalog() as cur:
            for column in narrower(schema.columns, capacities):
                statement = sink.alter_column_sql(schema.table, column, column.name in schema.primary_key)
                log.warning("%s: target column '%s' (%s) does not hold the source's %s: %s", schema.table,
                            column.name, capacities[column.name].type_text, column.native, statement)
                try:
                    cur.execute(statement)
                except Exception as exc:
                    raise TableError(
                        f"target table {schema.table} on {sink.url}: column '{column.name}' "
                        f"({capacities[column.name].type_text}) does not hold the source's {column.native}, and "
                        f"{statement} failed: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}",
                        "alter the target column by hand so it holds the source's values, or drop the target "
                        "table so the re-plan creates it from the source") from None
        self._capacities.pop(schema.table, None)

    def add_columns(self, schema: TableSchema, columns: list[Column], defaults: dict[str, str] | None = None) -> None:
        """Add to the target table those of `columns` it lacks (the source added them), each with its constant
        default in `defaults`, so that the rows there get it as the source's did (no log event carries them)."""
        defaults = defaults or {}
        sink = self.sink
        self._capacities.pop(schema.table, None)
        existing = sink.existing_columns(schema.table) or set()
        with sink.catalog() as cur:
            for column in columns:
                if column.name not in existing:
                    cur.execute(f"ALTER TABLE {sink.table_sql(schema.table)} ADD COLUMN {sink.q(column.name)} "
                                f"{sink.column_type(column, False)}"
                                + (f" DEFAULT {defaults[column.name]}" if column.name in defaults else ""))

    def capacities(self, table: TableId, fresh: bool = False) -> dict[str, Capacity | None]:
        """What each column of the target table holds, from its catalog: read once per table and sink (each run
        has its own sink, so a column the user altered is seen by the next run), or anew when `fresh`."""
        found = None if fresh else self._capacities.get(table)
        if found is None:
            with self.sink.catalog() as cur:
                cur.execute("SELECT column_name, data_type, character_maximum_length, numeric_precision, "
                            f"numeric_scale, datetime_precision, {self.sink.column_type_sql} "
                            "FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                            (table.namespace, table.name))
                found = {r[0]: capacity(*r[1:]) for r in cur.fetchall()}
            self._capacities[table] = found
        return found
