"""The application's side of a scenario: the writer that runs its transactions on the source, and the connection
the oracle reads the source through. Both outlive a source restart when the scenario has one."""
from __future__ import annotations

import threading
import time
import uuid

from cdc_assets.engine.target_down import connection_lost
from cdc_assets_tests.adversary.kinds import MYSQL

LEDGER = "adv_ledger"  # not captured: which of a writer's transactions committed, for the retry after a restart
RECONNECT_WITHIN = 120.0  # seconds a restarted source has to answer again before the workload fails
ATTEMPTS = 5  # runs of one transaction, each broken by a lost connection, before the workload fails


def q(engine: str, name: str) -> str:
    return f"`{name}`" if engine == MYSQL else f'"{name}"'


def ledger_ddl(engine: str, namespace: str) -> str:
    return f"CREATE TABLE {q(engine, namespace)}.{q(engine, LEDGER)} (k VARCHAR(40) PRIMARY KEY)"


class Source:
    """An autocommit connection to the source database, opened again by `reopen` after the server restarted."""

    def __init__(self, server, database: str) -> None:
        self.server, self.database = server, database
        self.conn = server.connect(database)

    def cursor(self):
        return self.conn.cursor()

    def reopen(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - the restart closed it already
            pass
        self.conn = self.server.connect(self.database)

    def close(self) -> None:
        self.conn.close()


class Writer(threading.Thread):
    """The application: runs its transactions in order, a pause between them. With a `ledger` (the source is
    restarted meanwhile), a transaction the restart broke is run again on a new connection, as an application
    would, but never twice: each first inserts its own key into the ledger table, in the same transaction, so
    that when its COMMIT got no answer the ledger says whether it committed."""

    def __init__(self, connect, transactions, session=(), pause: float = 0.03, ledger: str = "") -> None:
        super().__init__(daemon=True)
        self.connect, self.transactions, self.pause, self.session = connect, transactions, pause, session
        self.ledger = ledger  # the qualified ledger table, or "" to fail at the first lost connection
        self.tag = uuid.uuid4().hex[:8]
        self.error: str = ""
        self.done = 0  # transactions committed so far
        self.retried = 0  # transactions run again after a restart broke them

    def run(self) -> None:
        conn = None
        try:
            conn = self._open()
            for number, tx in enumerate(self.transactions):
                for attempt in range(1, ATTEMPTS + 1):
                    try:
                        self._transaction(conn, number, tx)
                        break
                    except Exception as exc:
                        if not self.ledger or attempt == ATTEMPTS or connection_lost(exc) is None:
                            raise
                        conn, committed = self._after_loss(conn, number)
                        if committed:
                            break
                        self.retried += 1
                self.done += 1
                time.sleep(self.pause)
        except Exception as exc:  # noqa: BLE001 - reported as a harness error with the statement's error
            self.error = f"the workload failed: {exc}"
        finally:
            if conn is not None:
                _close(conn)

    def _open(self):
        conn = self.connect()
        with conn.cursor() as cur:
            for statement in self.session:
                cur.execute(statement)
        return conn

    def _transaction(self, conn, number: int, tx) -> None:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            if self.ledger:
                cur.execute(f"INSERT INTO {self.ledger} VALUES ('{self.tag}:{number}')")
            for statement in tx:
                cur.execute(statement)
            cur.execute("COMMIT")

    def _after_loss(self, conn, number: int):
        """A new connection once the source answers again, and whether transaction `number` committed."""
        _close(conn)
        deadline = time.monotonic() + RECONNECT_WITHIN
        while True:
            try:
                conn = self._open()
                with conn.cursor() as cur:
                    cur.execute(f"SELECT 1 FROM {self.ledger} WHERE k = '{self.tag}:{number}'")
                    return conn, cur.fetchone() is not None
            except Exception as exc:
                _close(conn)
                if time.monotonic() > deadline or connection_lost(exc) is None:
                    raise
                time.sleep(0.5)


def _close(conn) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - the restart closed it already
        pass
