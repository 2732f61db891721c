"""The capture decision from a server's flavour and SHOW GLOBAL VARIABLES, for MySQL 8.0 and 8.4.

The result sets are SHOW GLOBAL VARIABLES WHERE Variable_name IN (...) as a default-configured server answers
it: values are the "Default Value" entries of the MySQL 8.0 and 8.4 reference manuals' option tables
(replication-options-binary-log.html, replication-options-replica.html); 8.4 no longer has expire_logs_days
(removed in 8.4.0). The compose file's flags (docker/compose.yaml) turn them into a capturable server.
"""
from __future__ import annotations

import pytest

from cdc_assets.dbapi.mysql_flavour import MysqlFlavour
from cdc_assets.sources.mysql.capture import check

MYSQL_80 = MysqlFlavour.parse("8.0.36")
MYSQL_84 = MysqlFlavour.parse("8.4.0")
SERVER = "mysql://cdc:***@db:3306/ (MySQL 8.4.0)"

DEFAULTS_80 = {
    "binlog_expire_logs_auto_purge": "ON", "binlog_expire_logs_seconds": "2592000", "binlog_format": "ROW",
    "binlog_row_image": "FULL", "binlog_row_metadata": "MINIMAL", "binlog_row_value_options": "",
    "binlog_transaction_compression": "OFF", "expire_logs_days": "0", "log_bin": "ON",
    "log_replica_updates": "ON", "log_slave_updates": "ON",
}
DEFAULTS_84 = {k: v for k, v in DEFAULTS_80.items() if k != "expire_logs_days"}
# docker/compose.yaml's mysql service flags on top of the 8.4 defaults
COMPOSE_84 = {**DEFAULTS_84, "binlog_row_metadata": "FULL", "binlog_expire_logs_seconds": "604800"}


def test_mysql_defaults_lack_only_full_row_metadata():
    for flavour, variables in ((MYSQL_80, DEFAULTS_80), (MYSQL_84, DEFAULTS_84)):
        result = check(flavour, variables, replica=False, server=SERVER)
        assert result.problems == (f"binlog_row_metadata is MINIMAL on {SERVER}: set binlog_row_metadata=FULL "
                                   "(row events then carry column names)",)
        assert result.retention == f"binlog retention on {SERVER}: 30 days (binlog_expire_logs_seconds=2592000)"
        assert result.warnings == ()


def test_the_compose_servers_flags_pass_and_report_a_week():
    result = check(MYSQL_84, COMPOSE_84, replica=True, server=SERVER)
    assert result.problems == ()
    assert result.notes == [f"binlog retention on {SERVER}: 7 days (binlog_expire_logs_seconds=604800)"]


@pytest.mark.parametrize("name, value, setting", [
    ("log_bin", "OFF", "--log-bin"),
    ("binlog_format", "MIXED", "binlog_format=ROW"),
    ("binlog_row_image", "MINIMAL", "binlog_row_image=FULL"),
    ("binlog_row_metadata", "MINIMAL", "binlog_row_metadata=FULL"),
    ("binlog_transaction_compression", "ON", "binlog_transaction_compression=OFF"),
    ("binlog_row_value_options", "PARTIAL_JSON", "binlog_row_value_options=''"),
])
def test_each_setting_is_refused_by_name(name, value, setting):
    result = check(MYSQL_84, {**COMPOSE_84, name: value}, replica=False, server=SERVER)
    assert len(result.problems) == 1
    assert SERVER in result.problems[0] and setting in result.problems[0]


def test_a_replica_must_log_what_it_applies():
    off = {**COMPOSE_84, "log_replica_updates": "OFF", "log_slave_updates": "OFF"}
    assert check(MYSQL_84, off, replica=False, server=SERVER).problems == ()
    (problem,) = check(MYSQL_84, off, replica=True, server=SERVER).problems
    assert problem.startswith(f"{SERVER} is a replica and log_replica_updates is OFF") and "=ON" in problem
    # MySQL 8.0.25 and older name it log_slave_updates only
    old = MysqlFlavour.parse("8.0.25")
    (problem,) = check(old, {k: v for k, v in off.items() if k != "log_replica_updates"}, True, SERVER).problems
    assert "log_slave_updates=ON" in problem


def test_a_server_without_row_metadata_is_too_old():
    mysql57 = {k: v for k, v in DEFAULTS_80.items() if k not in ("binlog_row_metadata", "binlog_row_value_options",
                                                               "binlog_transaction_compression")}
    (problem,) = check(MysqlFlavour.parse("5.7.44"), mysql57, False, SERVER).problems
    assert "no binlog_row_metadata" in problem and "MySQL >= 8.0.1" in problem


def test_retention_reads_the_setting_the_server_uses():
    hour = check(MYSQL_80, {**COMPOSE_84, "binlog_expire_logs_seconds": "3600"}, False, SERVER)
    assert hour.retention.endswith("1 hours (binlog_expire_logs_seconds=3600)")
    assert hour.warnings and "under a day" in hour.warnings[0] and "binlog_expire_logs_seconds" in hour.warnings[0]
    days = check(MYSQL_80, {**COMPOSE_84, "binlog_expire_logs_seconds": "0", "expire_logs_days": "3"}, False, SERVER)
    assert days.retention.endswith("3 days (expire_logs_days=3)") and not days.warnings
    never = check(MYSQL_84, {**COMPOSE_84, "binlog_expire_logs_auto_purge": "OFF"}, False, SERVER)
    assert "no automatic expiry" in never.retention and not never.warnings
    none = check(MYSQL_84, {**COMPOSE_84, "binlog_expire_logs_seconds": "0"}, False, SERVER)
    assert "no expiry set" in none.retention
