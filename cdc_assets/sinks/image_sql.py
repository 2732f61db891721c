"""The before-image statements that MySQL and PostgreSQL spell differently (sinks/before_images.py holds the rest):
each SQL sink declares its engine's as `images`, so the savepoint storage never asks which engine it writes to."""
from __future__ import annotations

from typing import Protocol

from psycopg2.extras import execute_values

from cdc_assets.core.tables import TableSchema
from cdc_assets.sinks.mysql_values import log_adapter

EPOCH, PRESENT = "_cdc_epoch", "_cdc_present"
KEYS_PER_STATEMENT = 1000


class ImageSql(Protocol):
    def capture(self, cur, sink, schema: TableSchema, target: str, shadow: str, names: list[str],
                keys: list[tuple], epoch: int) -> None:
        """Image `keys` of `target` into `shadow` in `epoch` (their rows' `names` columns, or that they are
        absent), keeping an image the epoch holds already."""

    def merge_epoch(self, cur, sink, shadow: str, key: tuple[str, ...], rest: str, epoch: int, into: int) -> None:
        """Copy `epoch`'s images (`rest`: their columns) into epoch `into` where that one has none of the key."""


class MysqlImageSql:
    def capture(self, cur, sink, schema: TableSchema, target: str, shadow: str, names: list[str],
                keys: list[tuple], epoch: int) -> None:
        key, q = schema.primary_key, sink.q
        col_list = ", ".join(q(n) for n in names)
        adapt = {k: f for k in key
                 if (f := log_adapter(schema.column(k), sink.column_type(schema.column(k), False))) is not None}
        params = [tuple(adapt[k](v) if v is not None and k in adapt else v for k, v in zip(key, row)) for row in keys]
        one = f"({', '.join(['%s'] * len(key))})"
        key_list = ", ".join(q(k) for k in key)
        keep = f"ON DUPLICATE KEY UPDATE {q(EPOCH)} = VALUES({q(EPOCH)})"  # keeps the epoch's first image
        for i in range(0, len(params), KEYS_PER_STATEMENT):
            chunk = params[i:i + KEYS_PER_STATEMENT]
            flat = [v for row in chunk for v in row]
            cur.execute(f"INSERT INTO {shadow} ({q(EPOCH)}, {q(PRESENT)}, {col_list}) SELECT {int(epoch)}, 1, "
                        f"{col_list} FROM {target} WHERE ({key_list}) IN ({', '.join([one] * len(chunk))}) {keep}",
                        flat)
            cur.execute(f"INSERT INTO {shadow} ({q(EPOCH)}, {q(PRESENT)}, {key_list}) VALUES "
                        f"{', '.join([f'({int(epoch)}, 0, ' + ', '.join(['%s'] * len(key)) + ')'] * len(chunk))} "
                        f"{keep}", flat)

    def merge_epoch(self, cur, sink, shadow: str, key: tuple[str, ...], rest: str, epoch: int, into: int) -> None:
        q = sink.q
        # MySQL cannot insert into a table it selects from: through a derived table
        cur.execute(f"INSERT INTO {shadow} ({q(EPOCH)}, {rest}) SELECT {int(into)}, {rest} FROM "
                    f"(SELECT {rest} FROM {shadow} WHERE {q(EPOCH)} = %s) AS later "
                    f"ON DUPLICATE KEY UPDATE {q(EPOCH)} = {shadow}.{q(EPOCH)}", (epoch,))


class PostgresImageSql:
    def capture(self, cur, sink, schema: TableSchema, target: str, shadow: str, names: list[str],
                keys: list[tuple], epoch: int) -> None:
        key, q = schema.primary_key, sink.q
        col_list = ", ".join(q(n) for n in names)
        types = {k: sink.column_type(schema.column(k), True) for k in key}
        values = [f"v.{q(n)}" if n in key else f"t.{q(n)}" for n in names]
        match = " AND ".join(f"t.{q(k)} = v.{q(k)}" for k in key)
        execute_values(
            cur, f"INSERT INTO {shadow} ({q(EPOCH)}, {q(PRESENT)}, {col_list}) "
                 f"SELECT {int(epoch)}, CASE WHEN t.{q(key[0])} IS NULL THEN 0 ELSE 1 END, {', '.join(values)} "
                 f"FROM (VALUES %s) AS v({', '.join(q(k) for k in key)}) LEFT JOIN {target} t ON {match} "
                 f"ON CONFLICT ({', '.join(q(k) for k in (*key, EPOCH))}) DO NOTHING",
            [tuple(repr(v) if isinstance(v, float) else v for v in row) for row in keys],
            template="(" + ", ".join(f"CAST(%s AS {types[k]})" for k in key) + ")", page_size=5000)

    def merge_epoch(self, cur, sink, shadow: str, key: tuple[str, ...], rest: str, epoch: int, into: int) -> None:
        q = sink.q
        cur.execute(f"INSERT INTO {shadow} ({q(EPOCH)}, {rest}) SELECT {int(into)}, {rest} FROM {shadow} "
                    f"WHERE {q(EPOCH)} = %s ON CONFLICT ({', '.join(q(k) for k in (*key, EPOCH))}) DO NOTHING",
                    (epoch,))
