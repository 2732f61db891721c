"""One transaction on an autocommit DBAPI connection (PyMySQL or psycopg2), the only place that writes BEGIN,
COMMIT and ROLLBACK: the sinks' commits and the SQL position store all go through it.

The connections stay in autocommit so that statements outside a transaction (DDL, staging drops, reads) take
no locks past themselves; a transaction is therefore opened and closed by statement, not by the driver.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def transaction(conn) -> Iterator[object]:
    """A cursor inside one transaction on `conn`: committed when the block ends, rolled back (and the error
    raised again) when it raises, whatever it raises: an interrupt must not leave the transaction open."""
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        try:
            yield cur
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")
