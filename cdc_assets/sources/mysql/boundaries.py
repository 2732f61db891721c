"""Where a binlog stream stands: the file it reads, whether a group is open, and the last group boundary, the
only position handed out, with the GTID set logged up to it."""
from __future__ import annotations

from cdc_assets.core import gtid_sets
from cdc_assets.core.positions import MysqlPosition


class Boundaries:
    """The stream's place: `file` being read, `inside` a group or not, and the last `boundary`.

    Each boundary's GTID set is the previous boundary's plus the GTID of the group ending there (MariaDB: the
    group's domain moves to its d-s-n; MySQL: uuid:gno joins the intervals), so it is exact when `start`'s set
    is. Boundaries carry `server`, the identity of the server streaming. `by_gtid`: the stream opened at
    `start`'s GTID set on a server where its file/offset mean nothing, so no boundary is taken from a ROTATE or
    the log end before the first group ended (from then on they are this server's)."""

    def __init__(self, start: MysqlPosition, server: str, by_gtid: bool = False) -> None:
        self.boundary = start
        self.server = server
        self.positioned = not by_gtid
        self.file = start.file
        self.inside = False

    def end(self, log_pos: int, gtid: str) -> MysqlPosition:
        """The group ends at `log_pos` (of `file`), with `gtid` when it had one: the new boundary."""
        executed = gtid_sets.add(self.boundary.gtid_set, gtid) if gtid else self.boundary.gtid_set
        self.boundary = MysqlPosition(self.file, log_pos, executed, self.server)
        self.inside, self.positioned = False, True
        return self.boundary

    def within(self, log_pos: int) -> MysqlPosition:
        """A position inside the open group: on another server's positions it compares by the set before the
        group."""
        return MysqlPosition(self.file, log_pos, self.boundary.gtid_set, self.server)

    def rotate(self, file: str, position: int) -> None:
        """The stream goes on in `file` at `position`; outside a group that is a boundary."""
        self.file = file
        if not self.inside and self.positioned:
            self.boundary = MysqlPosition(file, position, self.boundary.gtid_set, self.server)

    def caught_up(self, file: str, pos: int) -> None:
        """The stream stands at the log end; outside a group that end is a boundary too."""
        if not self.inside and self.positioned:
            self.boundary = MysqlPosition(file, pos, self.boundary.gtid_set, self.server)

    def reopen(self) -> None:
        """The stream reopens at the boundary, outside any group."""
        self.file, self.inside = self.boundary.file, False
