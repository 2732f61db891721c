"""Which MySQL-protocol server we talk to, read once at connect time.

MySQL and MariaDB diverged on statements and variables we depend on (MySQL 8.2 renamed SHOW MASTER STATUS to
SHOW BINARY LOG STATUS and 8.4 removed the old name; GTIDs, NO PAD collations and replica variables differ). The
statement is chosen from the detected flavour and version, never by trying one and reading the error: a guess from
an error code can pick the wrong statement on a server we have not seen, silently.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class MysqlFlavour:
    mariadb: bool
    version: tuple[int, int, int]
    text: str  # VERSION() as the server printed it, for messages

    @classmethod
    def parse(cls, version: str, comment: str = "") -> "MysqlFlavour":
        """From `SELECT VERSION(), @@version_comment`. MariaDB says so in its version (10.11.19-MariaDB-0+deb12u1);
        MySQL, Percona and cloud builds print a bare number (8.0.36, 8.4.0, 8.0.36-28) and are MySQL here."""
        m = _VERSION.match(version)
        if m is None:
            raise ValueError(f"cannot read a server version from {version!r}")
        mariadb = "mariadb" in version.lower() or "mariadb" in comment.lower()
        return cls(mariadb, (int(m.group(1)), int(m.group(2)), int(m.group(3))), version)

    def at_least(self, *version: int) -> bool:
        return self.version >= tuple(version)

    @property
    def mysql8(self) -> bool:
        return not self.mariadb and self.at_least(8)

    @property
    def binlog_status_sql(self) -> str:
        # 8.2 deprecated SHOW MASTER STATUS and 8.4 removed it; MariaDB (to 11.x) knows only the old name.
        return "SHOW BINARY LOG STATUS" if not self.mariadb and self.at_least(8, 2) else "SHOW MASTER STATUS"

    @property
    def replica_status_sql(self) -> str:
        # MySQL 8.0.22 and MariaDB 10.5 added SHOW REPLICA STATUS; MySQL 8.4 dropped SHOW SLAVE STATUS.
        if self.at_least(10, 5) if self.mariadb else self.at_least(8, 0, 22):
            return "SHOW REPLICA STATUS"
        return "SHOW SLAVE STATUS"

    @property
    def log_replica_updates_variable(self) -> str:
        if self.mariadb:
            return "log_slave_updates"
        return "log_replica_updates" if self.at_least(8, 0, 26) else "log_slave_updates"

    @property
    def gtid_executed_sql(self) -> str:
        """The server's GTID state as one string: MariaDB's domain-server-seq list, MySQL's uuid:interval set."""
        return "SELECT @@GLOBAL.gtid_binlog_pos" if self.mariadb else "SELECT @@GLOBAL.gtid_executed"

    @property
    def nopad_binary_collation(self) -> str:
        """A utf8mb4 collation that compares bytes and keeps trailing spaces significant (NO PAD), so keys that differ
        only in case, accents or trailing spaces stay distinct. MySQL's utf8mb4_bin is PAD SPACE; 0900_bin is not."""
        if self.mariadb:
            return "utf8mb4_nopad_bin"
        return "utf8mb4_0900_bin" if self.at_least(8, 0, 17) else "utf8mb4_bin"

    @property
    def server_identity_sql(self) -> str:
        """Who wrote a binlog: file/offset pairs mean something only on that server. MySQL names itself by
        server_uuid (unique by construction); MariaDB has none and relies on server_id, unique per topology."""
        return "SELECT @@GLOBAL.server_id" if self.mariadb else "SELECT @@GLOBAL.server_uuid"

    @property
    def binary_logs_sql(self) -> str:
        # The same statement on MySQL 5.7-8.4 and MariaDB (MySQL 8.4 removed only the SHOW MASTER LOGS synonym).
        return "SHOW BINARY LOGS"

    @property
    def generates_invisible_primary_keys(self) -> bool:
        """MySQL 8.0.30 added sql_generate_invisible_primary_key (an invisible `my_row_id` key on tables created
        without one) and show_gipk_in_create_table_and_information_schema, which can hide it from
        information_schema."""
        return not self.mariadb and self.at_least(8, 0, 30)

    def __str__(self) -> str:
        return ("MariaDB " if self.mariadb else "MySQL ") + self.text


def detect(conn) -> MysqlFlavour:
    with conn.cursor() as cur:
        return detect_on(cur)


def detect_on(cur) -> MysqlFlavour:
    """The flavour of the server `cur` is connected to, through that cursor."""
    cur.execute("SELECT VERSION(), @@version_comment")
    version, comment = cur.fetchone()
    return MysqlFlavour.parse(version, comment or "")
