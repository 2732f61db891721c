"""Stop a batch whose value the target would cut or round (core/fits.py), before anything of it is written."""
from __future__ import annotations

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.boundary import Sink
from cdc_assets.core.events import RowChange
from cdc_assets.core.fits import fits, holds
from cdc_assets.core.positions import Position
from cdc_assets.core.tables import TableSchema
from cdc_assets.errors import ValueMisfit


def check_fit(sink: Sink, schema: TableSchema, changes: TableChanges, log: list[RowChange],
              floor: Position | None) -> None:
    """Raise ValueMisfit for the first value of `changes` a target column would not hold as it is. Only the
    columns whose target type does not hold the source column's (`holds`) are looked at: most batches none."""
    capacities = sink.column_capacities(schema.table)
    doubtful = {c.name: cap for c in schema.columns if not holds(cap := capacities.get(c.name), c)}
    if not doubtful:
        return
    for key, row in (*changes.rows.items(), *changes.partial.items(),
                     *((new, move.columns) for new, move in changes.moves.items())):
        for name, cap in doubtful.items():
            if name in row and not fits(cap, value := row[name]):
                column = schema.column(name)
                raise ValueMisfit(schema.table, key, name, value, cap.type_text, _position(log, schema, key, floor),
                                  sink.alter_column_sql(schema.table, column))


def _position(log: list[RowChange], schema: TableSchema, key: tuple, floor: Position | None) -> str:
    """Where the row's last change of the batch lies in the log (or after which position, not known yet)."""
    for change in reversed(log):
        if change.table == schema.table and change.key == key and change.position is not None:
            return str(change.position)
    return f"a change after {floor}" if floor is not None else "a change of this batch"
