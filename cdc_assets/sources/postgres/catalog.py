"""The source's catalog as the log reader needs it, over a plain connection beside the replication one: type
names as `format_type` renders them, and which relation ids are the captured tables."""
from __future__ import annotations

from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect, qualified


class Catalog:
    def __init__(self, url: DbUrl, tables: list[TableId]) -> None:
        self.conn = connect(url)
        self._names: dict[tuple[int, int], str] = {}
        self._bases: dict[int, int] = {}
        self.relations: dict[int, TableId] = {}  # relation id (pg_class oid) -> captured table, by name at the start
        self.missing: list[TableId] = []  # captured tables no relation bears the name of (renamed or dropped)
        with self.conn.cursor() as cur:
            for table in tables:
                cur.execute("SELECT to_regclass(%s)::oid", (qualified("postgres", table.namespace, table.name),))
                oid = cur.fetchone()[0]
                if oid is None:
                    self.missing.append(table)
                else:
                    self.relations[oid] = table

    def type_name(self, type_oid: int, typmod: int) -> str:
        """As discovery names it (sources/postgres/source.py): a domain by its base type."""
        if (type_oid, typmod) not in self._names:
            with self.conn.cursor() as cur:
                cur.execute("SELECT CASE WHEN typtype = 'd' THEN format_type(typbasetype, typtypmod) "
                            "ELSE format_type(oid, %s) END FROM pg_type WHERE oid = %s", (typmod, type_oid))
                self._names[type_oid, typmod] = cur.fetchone()[0]
        return self._names[type_oid, typmod]

    def base_type(self, type_oid: int) -> int:
        """A domain's base type (its values' text is the base type's); any other type itself."""
        if type_oid not in self._bases:
            with self.conn.cursor() as cur:
                cur.execute("SELECT CASE WHEN typtype = 'd' THEN typbasetype ELSE oid END FROM pg_type WHERE oid = %s",
                            (type_oid,))
                self._bases[type_oid] = int(cur.fetchone()[0])
        return self._bases[type_oid]

    def leaves_not_full(self, table: TableId) -> list[TableId]:
        """The leaf partitions of `table` whose replica identity is not FULL (none for a plain table)."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT n.nspname, c.relname FROM pg_partition_tree(to_regclass(%s)) t "
                        "JOIN pg_class c ON c.oid = t.relid JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE t.isleaf AND c.relreplident <> 'f' ORDER BY 1, 2",
                        (qualified("postgres", table.namespace, table.name),))
            return [TableId(*row) for row in cur.fetchall()]

    def close(self) -> None:
        self.conn.close()
