"""A target transaction held open across calls, for a transaction that arrives in parts (TransactionPart):
its parts are applied one by one inside it, and its end commits it together with the checkpoint."""
from __future__ import annotations

import logging
from contextlib import ExitStack

log = logging.getLogger("cdc_assets.incremental")


class TargetTransaction:
    """`sink.transaction()` held open across calls: a transaction in parts spans many items of the log."""

    def __init__(self, sink) -> None:
        self._scope = ExitStack()
        self.cursor = self._scope.enter_context(sink.transaction())

    def commit(self) -> None:
        self._scope.close()

    def rollback(self) -> None:
        reason = RuntimeError("rolled back")
        try:
            self._scope.__exit__(RuntimeError, reason, None)
        except Exception as exc:  # a lost connection: the server rolls the transaction back itself
            log.warning("rolling back the target transaction failed (%s); the server drops it with the connection", exc)
