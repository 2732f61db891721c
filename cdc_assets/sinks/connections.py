"""A SQL sink's connections: its own autocommit connection for catalog reads and DDL, held by one thread at a time,
and a commit connection per thread for the transactions that make rows visible."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, ContextManager, Iterator

from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.connect import connect
from cdc_assets.dbapi.transaction import transaction


class TargetConnections:
    def __init__(self, url: DbUrl) -> None:
        self.url = url
        self._own = connect(url, autocommit=True)
        self._own_guard = threading.RLock()  # see catalog
        self._commit_conns: dict[int, Any] = {}  # see committer
        self._commit_lock = threading.Lock()

    @contextmanager
    def catalog(self) -> Iterator[Any]:
        """A cursor on the sink's own autocommit connection (catalog reads, DDL), held by one thread at a time: the
        log phase checks the next batch against the catalog while the batch before applies on another thread, and
        both reach this connection; a connection shared by two threads at once breaks its protocol."""
        with self._own_guard, self._own.cursor() as cur:
            yield cur

    def transaction(self) -> ContextManager:
        """A cursor inside one transaction on the calling thread's commit connection (dbapi/transaction.py)."""
        return transaction(self.committer())

    def committer(self):
        """The calling thread's commit connection, opened on its first use: the snapshot commits on threads of
        its own (`concurrent_commits`), beside the thread that creates staging tables on the sink's own
        connection; everything else commits from one thread."""
        conn = self._commit_conns.get(threading.get_ident())
        if conn is None:
            with self._commit_lock:
                alive = {thread.ident for thread in threading.enumerate()}
                for ident in [i for i in self._commit_conns if i not in alive]:  # an earlier table's commit threads
                    self._commit_conns.pop(ident).close()
                conn = self._commit_conns[threading.get_ident()] = connect(self.url, autocommit=True)
        return conn

    def close(self) -> None:
        self._own.close()
        for conn in self._commit_conns.values():
            conn.close()
