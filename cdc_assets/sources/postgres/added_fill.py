"""What PostgreSQL gave the rows there before an ADD COLUMN (core/added_fill.py). The WAL has no DDL, but the
catalog keeps it: an ADD with a non-volatile default stores the value those rows got in `attmissingval`, whatever
the column's default became later. Without it (no default, a volatile one that rewrote the table with a value per
row, or a rewrite since) a column that has no default now got NULL, unless the table was rewritten since the task
last read its definitions: a rewrite (ALTER TYPE, VACUUM FULL, CLUSTER) writes the value into every row and clears
`attmissingval`, so an ADD DEFAULT 7 whose default was dropped before the rewrite looks like an ADD without one.
The task keeps the table's storage (each leaf's relfilenode, which a rewrite changes) with its definitions, and
stops where it changed or is unknown. One that has a default now cannot be told apart from those cases either. A
partitioned table keeps no value of its own (it has no rows): each partition there at the ADD keeps it."""
from __future__ import annotations

import re

from cdc_assets.core.added_fill import AddedFill, number, quoted

_FILL_SQL = """
SELECT a.attname, a.attrelid = %s::regclass, a.atthasmissing, a.attmissingval::text,
       pg_get_expr(d.adbin, d.adrelid), COALESCE(b.typcategory, t.typcategory)
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type b ON t.typtype = 'd' AND b.oid = t.typbasetype
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE (a.attrelid = %s::regclass OR a.attrelid IN (SELECT relid FROM pg_partition_tree(%s::regclass)))
  AND a.attname = ANY(%s)
  AND NOT a.attisdropped"""
_STORAGE_SQL = """
SELECT string_agg(c.oid || ':' || c.relfilenode, ',' ORDER BY c.oid) FROM pg_class c
WHERE (c.oid = %s::regclass AND c.relkind <> 'p')
   OR c.oid IN (SELECT relid FROM pg_partition_tree(%s::regclass) WHERE isleaf)"""
_ESCAPED = re.compile(r"\\(.)", re.S)


def storage(conn, regclass: str) -> str | None:
    """The table's storage as `oid:relfilenode` of each leaf (a table that is not partitioned is its own leaf)."""
    with conn.cursor() as cur:
        cur.execute(_STORAGE_SQL, (regclass, regclass))
        return cur.fetchone()[0]


def added_fill(conn, regclass: str, names: list[str], before: str | None) -> AddedFill:
    """`before`: the table's storage when the task last read its definitions (None: unknown)."""
    with conn.cursor() as cur:
        cur.execute(_FILL_SQL, (regclass, regclass, regclass, list(names)))
        rows = cur.fetchall()
    rewritten = before is None or before != storage(conn, regclass)
    fill = AddedFill()
    for name in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == name]
        kept = {r[3] for r in mine if r[2]}  # the table's own, or each partition's (the tree lists the root too)
        default, category = next((r[4], r[5]) for r in mine if r[1])
        if len(kept) > 1:
            fill.unknown[name] = f"its partitions' rows got different values ({', '.join(sorted(kept))})"
        elif kept:
            missing = kept.pop()
            literal = _literal(_element(missing), category)
            if literal is None:
                fill.unknown[name] = f"its value {missing} has no constant both target engines read alike"
            else:
                fill.literals[name] = literal
        elif default is not None:
            fill.unknown[name] = (f"its default {default} was volatile (a value per row), set after the ADD, or the "
                                  "table was rewritten since: the catalog no longer says which")
        elif rewritten:
            fill.unknown[name] = ("the table was rewritten (ALTER TYPE, VACUUM FULL, CLUSTER) since the task last "
                                  "read its definitions, or the task cannot tell: a rewrite writes the value the "
                                  "rows got at the ADD into them and clears it from the catalog")
    return fill


def _element(array_text: str) -> str:
    """The one element of `attmissingval`'s text ({7}, {"it's \\"q\\""})."""
    inner = array_text[1:-1]
    return _ESCAPED.sub(r"\1", inner[1:-1]) if inner.startswith('"') else inner


def _literal(text: str, category: str) -> str | None:
    if category == "A":
        return None  # an array's element text would need the array's own quoting rules on each engine
    if category == "N":
        return number(text) or quoted(text)
    if category == "B":
        return "'1'" if text == "t" else "'0'"
    return quoted(text)
