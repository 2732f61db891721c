"""Rows events of the captured tables -> RowChanges in the group being read: each image decoded by the row decoder
specialised to the table's layout (row_decoder.py) or the library's way, normalised to the described columns, and
refused where the binlog cannot give the row right (a partial image, a zero date, a partial JSON update that does
not apply)."""
from __future__ import annotations

from pymysqlreplication.constants import NONE_SOURCE
from pymysqlreplication.row_event import DeleteRowsEvent, RowsEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_assets.core.events import Op, RowChange
from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.errors import REPLAN_HINT, SourceSetupError
from cdc_assets.sources.mysql.boundaries import Boundaries
from cdc_assets.sources.mysql.charsets import undecodable
from cdc_assets.sources.mysql.partial_json import JsonDiffError, resolve_partial_json
from cdc_assets.sources.mysql.row_decoder import RowDecoders
from cdc_assets.sources.mysql.table_map import adopt
from cdc_assets.sources.mysql.values import converters, described, normalise_image
from cdc_assets.sources.mysql.zero_dates import ZeroDates

ROW_METADATA_HINT = ("set binlog_row_metadata=FULL in the server config (MariaDB >= 10.5, MySQL >= 8.0.14); "
                     "changes logged before that cannot be read by column name: " + REPLAN_HINT)

ROW_IMAGE_HINT = ("make every session log full row images (binlog_row_image=FULL in the server config, and no "
                  "SET SESSION binlog_row_image=MINIMAL/NOBLOB), then re-snapshot the tables: " + REPLAN_HINT)

PARTIAL_JSON_HINT = ("set binlog_row_value_options='' (the default) and binlog_row_image=FULL on the source (globally "
                     "and in the writing sessions), then " + REPLAN_HINT)

_WHOLE: dict = {}  # the none_sources of a whole row image: no column missing (never written to)


class RowEvents:
    """`insert`, `update` and `delete` each add one rows event's changes to `changes`, the open group's (its
    owner, the assembly's `Assembler`, takes them at the group's end): a row image per change, with the key the
    sinks apply it by, at a position inside the group (`at.within`). Events of tables not in `schemas` add
    nothing.

    A TABLE_MAP's columns are adopted (table_map.py) once per TABLE_MAP, that is once per transaction, not per
    event; a TABLE_MAP without column names (binlog_row_metadata MINIMAL) is refused."""

    def __init__(self, schemas: dict[TableId, TableSchema], where: str, at: Boundaries) -> None:
        self.schemas = schemas
        self.where = where
        self.at = at
        self.changes: list[RowChange] = []
        self._convs = {table: converters(schema) for table, schema in schemas.items()}
        self._names = {table: frozenset(c.name for c in schema.columns) for table, schema in schemas.items()}
        self._decoders = RowDecoders(self._names, self._convs)
        self._adopted: dict[TableId, list] = {}  # table -> the last TABLE_MAP's columns, adopted
        self._zero_dates = {table: ZeroDates(schema) for table, schema in schemas.items()}

    def insert(self, event: WriteRowsEvent) -> None:
        if found := self._rows(event):
            table, schema, convs, pos = found
            zero_dates, changes = self._zero_dates[table], self.changes
            for after, nones in self._images(event, table, convs, pos):
                key = _key(schema, after)
                if nones:
                    self._require_whole(table, nones, pos, f"an insert of key {key}")
                zero_dates.check(after, key, pos, self.where)
                changes.append(RowChange(table, Op.INSERT, key, after, None, pos))

    def update(self, event: UpdateRowsEvent) -> None:
        if found := self._rows(event):
            table, schema, convs, pos = found
            zero_dates, changes = self._zero_dates[table], self.changes
            for before, after, after_nones in self._pairs(event, table, convs, pos):
                # MINIMAL leaves unchanged key columns out of the after image; the before image has the key.
                if after_nones and any(k not in after for k in schema.primary_key):
                    after = {**{k: before[k] for k in schema.primary_key if k not in after}, **after}
                key, old = _key(schema, after), _key(schema, before)
                if key != old and after_nones:  # a partial row can update its key's row, not make one at another key
                    self._require_whole(table, after_nones, pos, f"an update moving key {old} to {key}")
                zero_dates.check(before, old, pos, self.where, before=True)
                zero_dates.check(after, key, pos, self.where)
                changes.append(RowChange(table, Op.UPDATE, key, after, before, pos))

    def delete(self, event: DeleteRowsEvent) -> None:
        if found := self._rows(event):
            table, schema, convs, pos = found
            zero_dates, changes = self._zero_dates[table], self.changes
            for before, _ in self._images(event, table, convs, pos):
                key = _key(schema, before)
                zero_dates.check(before, key, pos, self.where, before=True)
                changes.append(RowChange(table, Op.DELETE, key, None, before, pos))

    def _rows(self, event: RowsEvent) -> tuple[TableId, TableSchema, dict, MysqlPosition] | None:
        table = TableId(event.schema, event.table)
        schema = self.schemas.get(table)
        if schema is None:
            return None  # only_schemas x only_tables lets through more than the captured pairs
        columns = event.columns
        if self._adopted.get(table) is not columns:  # a new TABLE_MAP
            if any(not c.name for c in columns):
                raise SourceSetupError(f"the binlog of {self.where} carries no column names for {table}",
                                       ROW_METADATA_HINT)
            adopt(columns, schema)
            self._adopted[table] = columns
        at = self.at
        at.inside = True
        # `at.within(log_pos)`, written out: this runs once per event
        return table, schema, self._convs[table], MysqlPosition(at.file, event.packet.log_pos,
                                                               at.boundary.gtid_set, at.server)

    def _images(self, event: WriteRowsEvent | DeleteRowsEvent, table: TableId, convs: dict, pos: MysqlPosition
                ) -> list[tuple[dict, dict]]:
        """The event's row images normalised, each with the library's none_sources (empty: the image is whole)."""
        try:
            fast = self._decoders.rows(event, table)
            if fast is not None:
                return [(image, _WHOLE) for image in fast]
            names = self._names[table]
            return [(normalise_image(described(row["values"], names), row["none_sources"], convs),
                     row["none_sources"]) for row in event.rows]
        except UnicodeDecodeError as exc:
            raise undecodable(self.schemas[table], exc, pos, self.where) from None

    def _pairs(self, event: UpdateRowsEvent, table: TableId, convs: dict, pos: MysqlPosition
               ) -> list[tuple[dict, dict, dict]]:
        """(before, after, after's none_sources) per row of an update, normalised."""
        try:
            fast = self._decoders.pairs(event, table)
            if fast is not None:
                return [(before, after, _WHOLE) for before, after in fast]
            names = self._names[table]
            return [(normalise_image(described(row["before_values"], names), row["before_none_sources"], convs),
                     normalise_image(described(row["after_values"], names), row["after_none_sources"], convs),
                     row["after_none_sources"]) for row in self._whole_json(event, table, pos)]
        except UnicodeDecodeError as exc:
            raise undecodable(self.schemas[table], exc, pos, self.where) from None

    def _whole_json(self, event: UpdateRowsEvent, table: TableId, pos: MysqlPosition) -> list[dict]:
        """The event's rows, with each partial JSON value (binlog_row_value_options=PARTIAL_JSON) rebuilt from
        the before image into the whole document."""
        try:
            rows = event.rows
            for row in rows:
                resolve_partial_json(row["before_values"], row["after_values"])
        except JsonDiffError as exc:
            raise SourceSetupError(f"a partial JSON update of {table} at {pos} in the binlog of {self.where} cannot "
                                   f"be applied: {exc}", PARTIAL_JSON_HINT) from None
        return rows

    def _require_whole(self, table: TableId, none_sources: dict, pos: MysqlPosition, what: str) -> None:
        missing = [name for name, source in none_sources.items() if source == NONE_SOURCE.COLS_BITMAP]
        if missing:
            raise SourceSetupError(
                f"{what} in {table} at {pos} in the binlog of {self.where} lacks columns {missing}: the writing "
                "session logged a partial row image (binlog_row_image MINIMAL or NOBLOB), and their values are "
                "only in the source", ROW_IMAGE_HINT)


def _key(schema: TableSchema, image: dict) -> tuple:
    key = schema.primary_key
    return (image[key[0]],) if len(key) == 1 else tuple([image[k] for k in key])
