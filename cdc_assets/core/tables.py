"""Tables and their columns as pure values.

A MySQL database maps to a PostgreSQL schema of the same name and back, so a `TableId` is
`namespace.name` on either side.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from enum import Enum

from cdc_assets.errors import ConfigError

_IDENT = re.compile(r"^[A-Za-z0-9_$]+$")


@dataclass(frozen=True, order=True)
class TableId:
    namespace: str
    name: str

    @classmethod
    def parse(cls, text: str) -> "TableId":
        parts = text.split(".")
        if len(parts) != 2 or not all(_IDENT.match(p) for p in parts):
            raise ConfigError(
                f"table '{text}' is not of the form database.table (MySQL) or schema.table (PostgreSQL)",
                "write it qualified, e.g. shop.orders; names may use letters, digits, _ and $",
            )
        return cls(parts[0], parts[1])

    def __str__(self) -> str:
        return f"{self.namespace}.{self.name}"

    @property
    def asset_path(self) -> list[str]:
        """Asset key parts: Dagster allows only [A-Za-z0-9_] in each part."""
        return [re.sub(r"[^A-Za-z0-9_]", "_", self.namespace), re.sub(r"[^A-Za-z0-9_]", "_", self.name)]


class Kind(str, Enum):
    """Logical column kinds: what a value is, independent of the database that stores it."""

    BOOL = "bool"
    INT = "int"  # fits a signed 64-bit integer
    UINT64 = "uint64"  # MySQL BIGINT UNSIGNED
    DECIMAL = "decimal"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    STRING = "string"
    BINARY = "binary"
    DATE = "date"
    DATETIME = "datetime"  # wall clock, no time zone
    TIMESTAMP = "timestamp"  # an instant (MySQL TIMESTAMP, PG timestamptz)
    TIME = "time"  # MySQL TIME spans -838:59:59..838:59:59, PG time 00:00..24:00
    INTERVAL = "interval"
    YEAR = "year"
    JSON = "json"
    ENUM = "enum"
    SET = "set"
    BIT = "bit"
    UUID = "uuid"
    ARRAY = "array"
    GEOMETRY = "geometry"  # MySQL spatial types, read as MySQL's own form: a 4-byte SRID, then WKB
    OTHER = "other"  # a type the source names whose text form travels exactly (docs/connectors/index.md)
    UNKNOWN = "unknown"  # no mapping: refused at plan time unless the column is excluded


@dataclass(frozen=True)
class Column:
    """One column: its logical kind plus the source's exact declaration (`native`)."""

    name: str
    kind: Kind
    native: str  # e.g. "decimal(65,30)", "bigint unsigned", "timestamp(6) with time zone"
    nullable: bool = True
    length: int | None = None  # chars for strings, bits for BIT, bytes for fixed binary
    precision: int | None = None  # digits for DECIMAL, fractional seconds for temporal kinds
    scale: int | None = None
    bits: int | None = None  # integer width: 8, 16, 24, 32, 64
    unsigned: bool = False
    values: tuple[str, ...] = ()  # ENUM / SET members
    element: str | None = None  # ARRAY element type (PostgreSQL name)
    collation: str | None = None  # MySQL text columns: how the source compares them (keys must not merge)
    charset: str | None = None  # MySQL text columns: the character set their bytes are in


@dataclass(frozen=True)
class TableSchema:
    table: TableId
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]  # or the configured split column for tables without one
    excluded: tuple[str, ...] = ()  # source columns left out by source.exclude_columns: never read nor written
    # Where the source stores the rows, read when the catalog showed these definitions and no later change
    # (PostgreSQL: each leaf's `oid:relfilenode`: the oid finds the table's relations in the log under any name,
    # the relfilenode changes with a rewrite); None where the source has no such name.
    # Not part of the definitions: two reads of one definition compare equal.
    storage: str | None = field(default=None, compare=False)

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(name)

    @property
    def split_column(self) -> Column:
        """Splits cut on the first key column; rows sharing it always land in one split."""
        return self.column(self.primary_key[0])


def schema_to_json(schema: TableSchema) -> dict:
    return {"table": str(schema.table), "primary_key": list(schema.primary_key), "excluded": list(schema.excluded),
            "columns": [{**asdict(c), "kind": c.kind.value, "values": list(c.values)} for c in schema.columns],
            **({"storage": schema.storage} if schema.storage is not None else {})}


def schema_from_json(data: dict) -> TableSchema:
    columns = tuple(Column(**{**c, "kind": Kind(c["kind"]), "values": tuple(c["values"])}) for c in data["columns"])
    return TableSchema(TableId.parse(data["table"]), columns, tuple(data["primary_key"]),
                       tuple(data.get("excluded", ())), data.get("storage"))
