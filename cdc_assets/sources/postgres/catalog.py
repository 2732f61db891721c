"""The source's catalog as the log reader needs it, over a plain connection beside the replication one: type
names as `format_type` renders them, and which relation ids are the captured tables.

A relation is a captured table by its id, not by its name: a Relation message carries the name the table had
when the change was made, and a table renamed since the task read its definitions bears another one now. The ids
come from the storage recorded with the definitions (`TableSchema.storage`: each leaf's oid, whose partition
tree's ancestors are the table itself when it is partitioned), and, for a table recorded without it, from its
name when the read starts."""
from __future__ import annotations

from typing import Mapping

from cdc_assets.core.positions import Position
from cdc_assets.core.tables import TableId, TableSchema
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect, qualified
from cdc_assets.errors import RENAMED_TABLE_WAY_OUT, TableError

# The relations a table recorded with `storage` is: its leaves, and every ancestor of a leaf (a partitioned table,
# published via its root). Ids of relations dropped since are left out.
_RECORDED_SQL = """
SELECT c.oid FROM pg_class c WHERE c.oid = ANY(%s::oid[])
UNION SELECT a.relid::oid FROM unnest(%s::oid[]) AS leaf(oid), LATERAL pg_partition_ancestors(leaf.oid) AS a"""


def recorded_ids(storage: str | None) -> list[int]:
    """The leaf oids in a recorded storage (`oid:relfilenode,...`; none when it was not recorded)."""
    return [int(part.split(":")[0]) for part in storage.split(",")] if storage else []


class Catalog:
    def __init__(self, url: DbUrl, schemas: Mapping[TableId, TableSchema]) -> None:
        self.conn = connect(url)
        self.captured = set(schemas)
        self._names: dict[tuple[int, int], str] = {}
        self._bases: dict[int, int] = {}
        self.relations: dict[int, TableId] = {}  # relation id (pg_class oid) -> captured table
        # Captured tables recorded without storage that no relation bears the name of (renamed or dropped). One
        # with storage is never missing: its ids outlive a rename, and a table dropped has no relation.
        self.missing: list[TableId] = []
        named: dict[int, TableId] = {}
        with self.conn.cursor() as cur:
            for table, schema in schemas.items():
                cur.execute("SELECT to_regclass(%s)::oid", (qualified("postgres", table.namespace, table.name),))
                oid = cur.fetchone()[0]
                if ids := recorded_ids(schema.storage):
                    cur.execute(_RECORDED_SQL, (ids, ids))
                    self.relations.update({found: table for (found,) in cur.fetchall()})
                if oid is not None:
                    named[oid] = table  # a table dropped and created again under its name has a new id
                elif not ids:
                    self.missing.append(table)
        # the ids recorded win over the names now: a captured table may bear the name another one had
        self.relations = {**named, **self.relations}

    def table_of(self, relation_id: int, named: TableId, earlier: TableId | None, at: Position) -> TableId:
        """The captured table a relation is: by its id (here, or `earlier`, what an earlier Relation message of the
        read with that id was), else by its name (`named`, a leaf partition's already its table's). One that
        neither tells is a captured table renamed before the read began and recorded without its ids: the one such
        table, or a stop when there are several (a guess sent one table's rows to another's target table)."""
        if relation_id in self.relations:
            return self.relations[relation_id]
        if earlier in self.captured:
            return earlier
        if named in self.captured or not self.missing:
            return named
        if len(self.missing) == 1:
            return self.missing[0]
        raise TableError(
            f"the log at {at} has changes of table {named}, which is one of the captured tables "
            f"{', '.join(map(str, self.missing))} that no table bears the name of now, and the task's records do not "
            "say which (they come from a version that did not keep relation ids)",
            f"for each of them that was renamed, {RENAMED_TABLE_WAY_OUT}, and run again (it is planned and "
            "snapshotted under its new name); remove a dropped one from source.tables")

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
