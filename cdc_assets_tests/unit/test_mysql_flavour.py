"""Flavour and version detection, from what real servers answer to `SELECT VERSION(), @@version_comment`.

Origins of the strings: MySQL Community 8.0.36 and 8.4.0 official docker images (`mysql:8.0.36`, `mysql:8.4.0`), Percona
Server 8.0.36-28 (its release notes give the version suffix), MySQL 5.7.44, MariaDB 11.4.2 (`mariadb:11.4`), and the
Debian MariaDB this machine ships (read again against a live server in test_mysql_flavour_live.py)."""
import pytest

from cdc_assets.dbapi.mysql_flavour import MysqlFlavour

CASES = {
    # (VERSION(), @@version_comment): (mariadb, status statement, replica status, replica-updates variable, gtid, key collation)
    ("8.4.0", "MySQL Community Server - GPL"):
        (False, "SHOW BINARY LOG STATUS", "SHOW REPLICA STATUS", "log_replica_updates", "gtid_executed", "utf8mb4_0900_bin"),
    ("8.2.0", "MySQL Community Server - GPL"):
        (False, "SHOW BINARY LOG STATUS", "SHOW REPLICA STATUS", "log_replica_updates", "gtid_executed", "utf8mb4_0900_bin"),
    ("8.0.36", "MySQL Community Server - GPL"):
        (False, "SHOW MASTER STATUS", "SHOW REPLICA STATUS", "log_replica_updates", "gtid_executed", "utf8mb4_0900_bin"),
    ("8.0.36-28", "Percona Server (GPL), Release 28, Revision 47601f19"):
        (False, "SHOW MASTER STATUS", "SHOW REPLICA STATUS", "log_replica_updates", "gtid_executed", "utf8mb4_0900_bin"),
    ("8.0.21", "MySQL Community Server - GPL"):
        (False, "SHOW MASTER STATUS", "SHOW SLAVE STATUS", "log_slave_updates", "gtid_executed", "utf8mb4_0900_bin"),
    ("5.7.44-log", "MySQL Community Server (GPL)"):
        (False, "SHOW MASTER STATUS", "SHOW SLAVE STATUS", "log_slave_updates", "gtid_executed", "utf8mb4_bin"),
    ("10.11.19-MariaDB-0+deb12u1", "Debian 12"):
        (True, "SHOW MASTER STATUS", "SHOW REPLICA STATUS", "log_slave_updates", "gtid_binlog_pos", "utf8mb4_nopad_bin"),
    ("11.4.2-MariaDB-ubu2404", "mariadb.org binary distribution"):
        (True, "SHOW MASTER STATUS", "SHOW REPLICA STATUS", "log_slave_updates", "gtid_binlog_pos", "utf8mb4_nopad_bin"),
    ("10.4.34-MariaDB", "MariaDB Server"):
        (True, "SHOW MASTER STATUS", "SHOW SLAVE STATUS", "log_slave_updates", "gtid_binlog_pos", "utf8mb4_nopad_bin"),
}


@pytest.mark.parametrize("answer", list(CASES), ids=[v for v, _ in CASES])
def test_statements_follow_flavour_and_version(answer):
    mariadb, status, replica, updates, gtid, collation = CASES[answer]
    flavour = MysqlFlavour.parse(*answer)
    assert flavour.mariadb is mariadb
    assert flavour.binlog_status_sql == status
    assert flavour.replica_status_sql == replica
    assert flavour.log_replica_updates_variable == updates
    assert gtid in flavour.gtid_executed_sql
    assert flavour.nopad_binary_collation == collation


def test_a_version_that_is_not_one_is_refused():
    with pytest.raises(ValueError, match="cannot read a server version"):
        MysqlFlavour.parse("unknown")
