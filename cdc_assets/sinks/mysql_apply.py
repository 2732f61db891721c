"""A log batch into a MySQL target: deletes and full rows' keys deleted in chunks, full rows inserted (PyMySQL
makes multi-row statements of them), key moves as copies of the old keys' rows (moves.py), partial rows updated."""
from __future__ import annotations

from typing import Any, Callable

from cdc_assets.core.batches import TableChanges
from cdc_assets.core.tables import TableSchema
from cdc_assets.sinks.moves import Moves, plan_moves
from cdc_assets.sinks.mysql_values import log_adapter

DELETE_CHUNK = 1000  # keys per DELETE ... IN (...)


class MysqlBatches:
    """The log batches of one MySQL sink, in the dialect it declares (`q`, `table_sql`, `column_type`)."""

    def __init__(self, sink) -> None:
        self.sink = sink

    def apply(self, cursor, schema: TableSchema, changes: TableChanges) -> None:
        q = self.sink.q
        table, key = self.sink.table_sql(schema.table), schema.primary_key
        adapt = self._adapters(schema)

        def value(name: str, v: Any) -> Any:
            return adapt[name](v) if v is not None and name in adapt else v

        moves = plan_moves(cursor, schema, changes, self.sink.move_marks, self.target_row, self.sink.url)
        gone = [*changes.deletes, *changes.rows, *moves.copies]
        one = f"({', '.join(['%s'] * len(key))})"
        cols = ", ".join(q(k) for k in key)
        for i in range(0, len(gone), DELETE_CHUNK):
            chunk = gone[i:i + DELETE_CHUNK]
            cursor.execute(f"DELETE FROM {table} WHERE ({cols}) IN ({', '.join([one] * len(chunk))})",
                           [value(k, v) for row in chunk for k, v in zip(key, row)])
        if changes.rows:
            names = [c.name for c in schema.columns]
            # PyMySQL turns executemany of INSERT ... VALUES into multi-row statements.
            cursor.executemany(f"INSERT INTO {table} ({', '.join(q(n) for n in names)}) "
                               f"VALUES ({', '.join(['%s'] * len(names))})",
                               [tuple(value(n, row.get(n)) for n in names) for row in changes.rows.values()])
        if moves.copies:
            self._insert_copies(cursor, schema, moves, value)
        where = " AND ".join(f"{q(k)} = %s" for k in key)
        for row in {**changes.partial, **moves.updates}.values():
            sets = [n for n in row if n not in key]
            if sets:
                cursor.execute(f"UPDATE {table} SET {', '.join(f'{q(n)} = %s' for n in sets)} WHERE {where}",
                               [value(n, row[n]) for n in sets] + [value(k, row[k]) for k in key])

    def target_row(self, cursor, schema: TableSchema, key: tuple) -> tuple | None:
        """The target's row under `key` (moves.py), looked up by its key's log values; the values read need no
        adapter: PyMySQL's write back unchanged (BIT and BLOB as bytes, DECIMAL, temporal types)."""
        q = self.sink.q
        adapt = self._adapters(schema)
        cursor.execute(f"SELECT {', '.join(q(c.name) for c in schema.columns)} FROM {self.sink.table_sql(schema.table)} "
                       f"WHERE " + " AND ".join(f"{q(k)} = %s" for k in schema.primary_key),
                       [adapt[k](v) if v is not None and k in adapt else v for k, v in zip(schema.primary_key, key)])
        return cursor.fetchone()

    def _insert_copies(self, cursor, schema: TableSchema, moves: Moves, value: Callable[[str, Any], Any]) -> None:
        """The old keys' rows (as read) under their new keys (log values), before the moves' columns update them."""
        q = self.sink.q
        names, key = [c.name for c in schema.columns], schema.primary_key
        cursor.executemany(f"INSERT INTO {self.sink.table_sql(schema.table)} ({', '.join(q(n) for n in names)}) "
                           f"VALUES ({', '.join(['%s'] * len(names))})",
                           [tuple(value(n, new[key.index(n)]) if n in key else row[i] for i, n in enumerate(names))
                            for new, row in moves.copies.items()])

    def _adapters(self, schema: TableSchema) -> dict[str, Callable[[Any], Any]]:
        return {c.name: f for c in schema.columns
                if (f := log_adapter(c, self.sink.column_type(c, False))) is not None}
