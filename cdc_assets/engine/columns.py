"""Which source columns a task carries. Discovery gives every column a kind; `source.exclude_columns` leaves
columns out of the snapshot and the log, and a column whose type has no mapping stops the plan, naming it and the
way out, before any value reaches Spark or the target."""
from __future__ import annotations

from dataclasses import replace

from cdc_assets.core.tables import Kind, TableSchema
from cdc_assets.errors import ConfigError, UnmappedType


def carried(schema: TableSchema, excluded: list[str]) -> TableSchema:
    """`schema` without the excluded columns; refuses unknown or key columns in `excluded`, and unmapped types."""
    names = [c.name for c in schema.columns]
    for name in excluded:
        if name not in names:
            raise ConfigError(f"source.exclude_columns names column '{name}', which table {schema.table} does not have",
                              f"its columns are {', '.join(names)}")
        if name in schema.primary_key:
            raise ConfigError(f"source.exclude_columns names '{name}', a key column of {schema.table}: the target "
                              "matches rows on it", f"remove '{name}' from source.exclude_columns")
    kept = tuple(c for c in schema.columns if c.name not in excluded)
    for column in kept:
        if column.kind == Kind.UNKNOWN and column.charset:
            raise UnmappedType(
                f"column '{column.name}' of {schema.table} ({column.native}) holds text in character set "
                f"{column.charset}, which the log phase cannot decode exactly as the server converts it "
                "(README \"Type mapping\")",
                f"convert the column on the source (ALTER TABLE ... MODIFY `{column.name}` ... CHARACTER SET utf8mb4), "
                f"or leave it out with source.exclude_columns: {{{schema.table}: [{column.name}]}}")
        if column.kind == Kind.UNKNOWN:
            raise UnmappedType(
                f"column '{column.name}' of {schema.table} has type {column.native}, which has no mapping to the "
                "target (docs/connectors/index.md, \"Types with no mapping\")",
                f"leave it out with source.exclude_columns: {{{schema.table}: [{column.name}]}}, or drop the table "
                "from source.tables")
    return replace(schema, columns=kept, excluded=tuple(excluded))
