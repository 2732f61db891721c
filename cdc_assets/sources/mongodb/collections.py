"""How a captured collection becomes a table: declared top-level fields, or the whole document as JSON.

Config (`source.collections`, one entry per captured `db.collection`):

    collections:
      shop.orders:                      # top-level fields, each with its logical kind
        fields: {_id: objectid, total: "decimal(20,4)", placed: timestamp, items: json, qty: int}
      shop.events: {}                   # no fields: columns `_id` (ObjectId hex) and `document` (Extended JSON)
      shop.tags: {id_kind: int}         # the whole document, an integer `_id`
      shop.mixed: {id_kind: json}       # `_id`s of several BSON types: each as its canonical Extended JSON text

`_id` is the key (MongoDB's only unique key every document has). Kinds are `Kind` values plus `objectid` (a
string column holding the 24 hex digits; `string` holds BSON strings only, so an ObjectId and the string of its
hex never share a key). A decimal names its precision and scale: SQL targets need them, a Decimal128 fixes neither.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from cdc_assets.core.tables import Column, Kind, TableId, TableSchema
from cdc_assets.errors import ConfigError

ID = "_id"
DOCUMENT = "document"  # the JSON column of a collection captured whole

OBJECT_ID = "objectid"
WHOLE_DOCUMENT = "bson document"  # the native type of the `document` column: not a declared field of kind json
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
# Kinds a BSON value can be carried to exactly (values.py); the rest have no BSON source.
FIELD_KINDS = (Kind.BOOL, Kind.INT, Kind.DECIMAL, Kind.FLOAT64, Kind.STRING, Kind.BINARY, Kind.UUID, Kind.DATE,
               Kind.DATETIME, Kind.TIMESTAMP, Kind.JSON)
_ID_KINDS = (Kind.STRING, Kind.INT, Kind.DECIMAL, Kind.BINARY, Kind.UUID, Kind.TIMESTAMP, Kind.JSON)  # + objectid
_NATIVE = {Kind.BOOL: "bool", Kind.INT: "long", Kind.DECIMAL: "decimal", Kind.FLOAT64: "double",
           Kind.STRING: "string", Kind.BINARY: "binData", Kind.UUID: "binData(4)", Kind.DATE: "date",
           Kind.DATETIME: "date", Kind.TIMESTAMP: "date", Kind.JSON: "object"}


@dataclass(frozen=True)
class FieldSpec:
    name: str
    kind: Kind
    precision: int | None = None  # DECIMAL digits; ms (3) for dates
    scale: int | None = None
    objectid: bool = False  # a STRING holding an ObjectId's hex (`objectid` in config)

    def column(self) -> Column:
        precision = 3 if self.kind in (Kind.DATETIME, Kind.TIMESTAMP) else self.precision
        native = "bson objectId" if self.objectid else f"bson {_NATIVE[self.kind]}"
        length = 24 if self.objectid else None
        return Column(self.name, self.kind, native, nullable=self.name != ID, length=length, precision=precision,
                      scale=self.scale)


@dataclass(frozen=True)
class CollectionSpec:
    """One captured collection: `fields` declared (the `_id` among them), or None for the whole document."""

    table: TableId  # database.collection
    fields: tuple[FieldSpec, ...] | None
    whole_id: FieldSpec = FieldSpec(ID, Kind.STRING, objectid=True)  # the `_id` column of a collection taken whole

    @property
    def id_field(self) -> FieldSpec:
        if self.fields is None:
            return self.whole_id
        return next(f for f in self.fields if f.name == ID)

    def schema(self) -> TableSchema:
        if self.fields is None:
            columns = (self.id_field.column(), Column(DOCUMENT, Kind.JSON, WHOLE_DOCUMENT))
        else:
            columns = tuple(f.column() for f in self.fields)
        return TableSchema(self.table, columns, (ID,))


def parse_kind(name: str, text: str, where: str) -> FieldSpec:
    if text.strip().lower() == OBJECT_ID:
        return FieldSpec(name, Kind.STRING, objectid=True)
    m = _DECIMAL.match(text.strip().lower())
    if m:
        return FieldSpec(name, Kind.DECIMAL, int(m.group(1)), int(m.group(2)))
    try:
        kind = Kind(text.strip().lower())
    except ValueError:
        kind = None
    if kind is Kind.DECIMAL:
        raise ConfigError(f"{where}: field '{name}' is a decimal without precision and scale",
                          "write it as decimal(P,S), e.g. decimal(20,4): the SQL column needs both")
    if kind not in FIELD_KINDS:
        raise ConfigError(f"{where}: field '{name}' has kind '{text}', which no BSON value maps to",
                          f"use one of: {', '.join(k.value for k in FIELD_KINDS)}, objectid or decimal(P,S)")
    return FieldSpec(name, kind)


def parse_collection(name: str, raw: dict | None) -> CollectionSpec:
    """One `source.collections` entry; raises ConfigError naming the collection and the key."""
    where = f"source.collections.{name}"
    parts = name.split(".", 1)
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"collection '{name}' is not of the form database.collection", "write it qualified, "
                          "e.g. shop.orders")
    raw = raw or {}
    unknown = set(raw) - {"fields", "id_kind"}
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}", "use fields or id_kind")
    table = TableId(parts[0], parts[1])
    if "fields" not in raw:
        id_field = parse_kind(ID, str(raw.get("id_kind", OBJECT_ID)), where)
        if id_field.kind not in _ID_KINDS:
            raise ConfigError(f"{where}: id_kind '{id_field.kind.value}' cannot hold an _id",
                              f"use one of: objectid, {', '.join(k.value for k in _ID_KINDS)}")
        return CollectionSpec(table, None, id_field)
    if "id_kind" in raw:
        raise ConfigError(f"{where}: id_kind is for collections captured whole", "declare _id among the fields")
    fields = tuple(parse_kind(field, str(kind), where) for field, kind in (raw["fields"] or {}).items())
    if ID not in [f.name for f in fields]:
        raise ConfigError(f"{where}: the fields do not declare _id", "add _id with its kind, e.g. _id: string")
    dotted = [f.name for f in fields if "." in f.name or f.name.startswith("$")]
    if dotted:
        raise ConfigError(f"{where}: field(s) {', '.join(dotted)} are not top-level field names",
                          "declare top-level fields only; capture nested ones inside a json field")
    return CollectionSpec(table, fields)


def spec_from_schema(schema: TableSchema) -> CollectionSpec:
    """The spec a described schema came from (`CollectionSpec.schema` undone), so a log reader handed only the
    schemas (as the engine records them in a checkpoint) reads documents exactly as the snapshot did. Columns left
    out with source.exclude_columns stay out."""
    fields = tuple(_field_of(schema.table, c) for c in schema.columns if c.native != WHOLE_DOCUMENT)
    if any(c.native == WHOLE_DOCUMENT for c in schema.columns):
        return CollectionSpec(schema.table, None, next(f for f in fields if f.name == ID))
    return CollectionSpec(schema.table, fields)


def _field_of(table: TableId, column: Column) -> FieldSpec:
    if not column.native.startswith("bson "):
        raise ConfigError(f"column '{column.name}' of {table} was not described by the MongoDB source "
                          f"(type {column.native})",
                          "re-plan the task: cdc-assets plan --replan")
    objectid = column.native == "bson objectId"
    decimal = column.kind is Kind.DECIMAL
    return FieldSpec(column.name, column.kind, column.precision if decimal else None,
                     column.scale if decimal else None, objectid)
