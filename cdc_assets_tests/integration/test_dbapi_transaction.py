"""The one transaction helper every SQL commit goes through (sinks, position store): what a block writes is
visible to another session only after the block ends, and none of it when the block raises, on both servers."""
import pytest

from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.dbapi.transaction import transaction
from cdc_assets_tests.support import source_database


def rows(conn) -> list[int]:
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM t ORDER BY id")
        return [r[0] for r in cur.fetchall()]


@pytest.mark.parametrize("kind", ["mysql", "postgres"])
def test_a_block_commits_at_its_end_and_rolls_back_what_it_wrote_when_it_raises(servers, unique_name, kind):
    server = servers.mariadb if kind == "mysql" else servers.postgres
    with source_database(servers, kind, unique_name, ["CREATE TABLE t (id INTEGER PRIMARY KEY)"]) as other:
        conn = connect(DbUrl.parse(server.url(unique_name)), autocommit=True)
        try:
            with transaction(conn) as tx:
                tx.execute("INSERT INTO t VALUES (1), (2)")
                assert rows(other) == []  # not yet committed: another session sees nothing
            assert rows(other) == [1, 2]

            with pytest.raises(KeyboardInterrupt):  # not only Exception: an interrupt rolls back too
                with transaction(conn) as tx:
                    tx.execute("DELETE FROM t WHERE id = 1")
                    tx.execute("INSERT INTO t VALUES (3)")
                    raise KeyboardInterrupt
            assert rows(other) == [1, 2]
            assert rows(conn) == [1, 2]  # the connection is out of the transaction, back in autocommit
        finally:
            conn.close()
