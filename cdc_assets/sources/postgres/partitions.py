"""Declarative partitioning: a partitioned table holds no rows itself, its leaf partitions do, and a change happens
in a leaf. The publication names the partitioned table and publishes via the root (see `ensure_publication`);
these catalog lookups cover the rest: leaves decoded under their own names, and configs naming both."""
from __future__ import annotations

from cdc_assets.core.tables import TableId
from cdc_assets.dbapi.connect import qualified
from cdc_assets.errors import REPLAN_HINT, ConfigError, SourceSetupError

# Every partition below a table, at any depth; none for a plain table or one that does not exist.
_BELOW_SQL = """
SELECT n.nspname, c.relname FROM pg_partition_tree(to_regclass(%s)) t
JOIN pg_class c ON c.oid = t.relid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE t.level > 0"""


def partitions_of(conn, tables: list[TableId]) -> dict[TableId, TableId]:
    """Partition -> the configured table it belongs to, for every configured partitioned table."""
    owners: dict[TableId, TableId] = {}
    with conn.cursor() as cur:
        for table in tables:
            cur.execute(_BELOW_SQL, (qualified("postgres", table.namespace, table.name),))
            owners.update({TableId(ns, name): table for ns, name in cur.fetchall()})
    return owners


def refuse_overlap(conn, tables: list[TableId]) -> None:
    """A partition's changes reach the task once, under one name: a config naming a partitioned table and one of
    its partitions would have the partition's rows in two target tables, one of them never updated."""
    owners = partitions_of(conn, tables)
    for table in tables:
        if table in owners:
            raise ConfigError(f"{table} is a partition of {owners[table]}, which source.tables names too: its rows "
                              f"are captured through {owners[table]}",
                              f"remove {table} (or {owners[table]}) from source.tables")


def refuse_partial_identity(catalog, table: TableId, after) -> None:
    """A partitioned table published via its root flags its changes' old rows by the root's replica identity: FULL
    on the root alone flags the partitions' key-only old rows ('O') as whole, NULL in every other column. Taken as
    whole rows, those NULLs would fill a moved row's unchanged columns on the target. `catalog.leaves_not_full`
    reads the identities now; `after`: the log position, for the message."""
    lacking = catalog.leaves_not_full(table)
    if lacking:
        raise SourceSetupError(
            f"{table} has REPLICA IDENTITY FULL but its partitions {', '.join(map(str, lacking))} do not (the log "
            f"after {after}): the log flags their old rows as whole though they hold only the key",
            "; ".join(f"ALTER TABLE {leaf} REPLICA IDENTITY FULL" for leaf in lacking) + " on the source, then "
            + REPLAN_HINT + " (the log holds those old rows as they were written: a replay would read them again)")
