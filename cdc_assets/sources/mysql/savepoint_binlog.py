"""A savepoint's hold on the MySQL/MariaDB binlog: none can be taken. The server keeps binlog files by its own
expiry (binlog_expire_logs_seconds); a rollback is possible while the oldest file still reaches the savepoint's
position, and is refused once it does not."""
from __future__ import annotations

from cdc_assets.core.positions import MysqlPosition, PositionsIncomparable, is_before
from cdc_assets.core.urls import DbUrl
from cdc_assets.errors import CdcError
from cdc_assets.sources.mysql.log import MysqlLog


class MysqlSavepointLog:
    def __init__(self, url: DbUrl, task_id: str, owner: str, log: MysqlLog) -> None:  # one binlog for every target
        self.log = log

    def create(self, savepoint: str, position: MysqlPosition) -> dict:
        return {}

    def check(self, savepoint: str, tag: dict, position: MysqlPosition) -> None:
        earliest = self.log.earliest()
        try:
            gone = is_before(position, earliest)
        except PositionsIncomparable as exc:
            raise CdcError(f"cannot roll back to savepoint {savepoint}: its position {position} cannot be compared with "
                           f"the oldest binlog position {earliest} on {self.log.url} ({exc.why})",
                           f"delete the savepoint (cdc-assets savepoint delete {savepoint})") from None
        if gone:
            raise CdcError(f"cannot roll back to savepoint {savepoint}: the binlog on {self.log.url} no longer reaches "
                           f"its position {position} (the oldest file starts at {earliest}: purged by the server's "
                           "binlog expiry)", f"delete the savepoint (cdc-assets savepoint delete {savepoint}); keep "
                           "binlogs longer (binlog_expire_logs_seconds) than savepoints must last")

    def restore(self, tag: dict) -> None:
        """Nothing to move: the binlog is read from any position it still has."""

    def repair(self, tag: dict) -> None:
        pass

    def drop(self, tag: dict) -> None:
        pass

    def describe(self) -> str:
        return "the binlog is kept by the server's expiry only (binlog_expire_logs_seconds)"
