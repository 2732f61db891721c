"""A PostgreSQL source whose keys differ only in case, accents or trailing spaces, and two tables whose names
differ only in case: what a MySQL target with an insensitive default collation must keep apart."""
from __future__ import annotations

KEYS = ["abc", "ABC", "e", "é", "E", "x", "x ", "Straße", "STRASSE"]
LABELS = ["a", "A", "á", "a "]


def seed(ns: str) -> list[str]:
    labels = ", ".join(f"'{k}'" for k in LABELS)
    return [f"CREATE SCHEMA {ns}", f"CREATE TYPE {ns}.mood AS ENUM ({labels})",
            f"CREATE TABLE {ns}.k (id VARCHAR(10) PRIMARY KEY, v INT)",
            f"INSERT INTO {ns}.k VALUES " + ", ".join(f"('{k}', {i})" for i, k in enumerate(KEYS)),
            f"CREATE TABLE {ns}.e (id {ns}.mood PRIMARY KEY, v INT)",
            f"INSERT INTO {ns}.e VALUES " + ", ".join(f"('{k}', {i})" for i, k in enumerate(LABELS)),
            f'CREATE TABLE {ns}."Items" (id INT PRIMARY KEY, v INT)', f'INSERT INTO {ns}."Items" VALUES (1, 1), (2, 2)',
            f"CREATE TABLE {ns}.items (id INT PRIMARY KEY, v INT)", f"INSERT INTO {ns}.items VALUES (1, 10), (3, 30)"]


def tables(ns: str) -> dict[str, str]:
    """Table name -> its SQL name on the source."""
    return {"k": f"{ns}.k", "e": f"{ns}.e", "Items": f'{ns}."Items"', "items": f"{ns}.items"}


def change(cur, ns: str) -> None:
    """Deletes, updates and inserts of keys that collide under an insensitive collation, for the log phase."""
    cur.execute(f"DELETE FROM {ns}.k WHERE id IN ('ABC', 'e')")
    cur.execute(f"UPDATE {ns}.k SET v = 100 WHERE id = 'é'")
    cur.execute(f"UPDATE {ns}.k SET v = 200 WHERE id = 'x '")
    cur.execute(f"INSERT INTO {ns}.k VALUES ('X', 300), ('É', 400), ('abc  ', 500)")
    cur.execute(f"UPDATE {ns}.e SET v = 100 WHERE id = 'A'")
    cur.execute(f"DELETE FROM {ns}.e WHERE id = 'a '")
    cur.execute(f'UPDATE {ns}."Items" SET v = 5 WHERE id = 1')
    cur.execute(f"INSERT INTO {ns}.items VALUES (5, 50)")


def rows(conn, table_sql: str) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, v FROM {table_sql}")
        return sorted(tuple(r) for r in cur.fetchall())
