"""What MySQL gave the rows there before an ADD COLUMN, from the statement alone (sources/mysql/added_fill.py)."""
from __future__ import annotations

import pytest

from cdc_assets.sources.mysql.added_fill import added_fill


@pytest.mark.parametrize("statement,literal", [
    ("ALTER TABLE t ADD COLUMN w INT DEFAULT 7", "7"),
    ("ALTER TABLE t ADD w INT DEFAULT -7.5 AFTER v", "-7.5"),
    ("ALTER TABLE t ADD COLUMN w INT DEFAULT +3", "3"),
    ("ALTER TABLE t ADD COLUMN w VARCHAR(9) DEFAULT 'it''s'", "'it''s'"),
    ("ALTER TABLE t ADD COLUMN w VARCHAR(9) DEFAULT '007'", "'007'"),  # stays a string: not 7
    ("ALTER TABLE t ADD COLUMN w BOOLEAN NOT NULL DEFAULT TRUE", "'1'"),
    ("ALTER TABLE t ADD COLUMN w INT NOT NULL", "0"),
    ("ALTER TABLE t ADD COLUMN w DECIMAL(5,2) NOT NULL COMMENT 'a DEFAULT CURRENT_TIMESTAMP'", "0"),
    ("ALTER TABLE t ADD COLUMN w VARCHAR(5) CHARACTER SET utf8mb4 NOT NULL", "''"),
    ("ALTER TABLE t ADD COLUMN (a INT, w TEXT NOT NULL)", "''"),
    ("/* c */ ALTER TABLE `db`.`t` ADD COLUMN IF NOT EXISTS `w` INT DEFAULT 1, ALGORITHM=INSTANT", "1"),
])
def test_the_rows_there_got_the_add_s_constant(statement, literal):
    fill = added_fill(statement, ["w"])
    assert fill.literals == {"w": literal} and not fill.unknown


@pytest.mark.parametrize("statement", [
    "ALTER TABLE t ADD COLUMN w INT",
    "ALTER TABLE t ADD COLUMN w INT NULL DEFAULT NULL",
    "ALTER TABLE t ADD COLUMN w VARCHAR(5) COMMENT 'NOT NULL'",
])
def test_the_rows_there_got_null(statement):
    fill = added_fill(statement, ["w"])
    assert not fill.literals and not fill.unknown


@pytest.mark.parametrize("statement,why", [
    ("ALTER TABLE t ADD COLUMN w DATETIME DEFAULT CURRENT_TIMESTAMP", "expression"),
    ("ALTER TABLE t ADD COLUMN w INT DEFAULT (1 + 1)", "expression"),
    ("ALTER TABLE t ADD COLUMN w VARCHAR(5) DEFAULT 'a\\\\b'", "backslash"),
    ("ALTER TABLE t ADD COLUMN w INT NOT NULL AUTO_INCREMENT UNIQUE", "row by row"),
    ("ALTER TABLE t ADD COLUMN w SERIAL", "row by row"),
    ("ALTER TABLE t ADD COLUMN w INT AS (v * 2) STORED", "row by row"),
    ("ALTER TABLE t ADD COLUMN w DATE NOT NULL", "implicit default"),
    ("ALTER TABLE t ADD COLUMN w ENUM('a','b') NOT NULL", "implicit default"),
    ("ALTER TABLE t ADD INDEX (w)", "not understood"),
])
def test_values_the_task_cannot_know_are_named(statement, why):
    fill = added_fill(statement, ["w"])
    assert not fill.literals and why in fill.unknown["w"]


def test_a_bare_timestamp_is_known_only_where_explicit_defaults_for_timestamp_is_on():
    statement = "ALTER TABLE t ADD COLUMN w TIMESTAMP"
    assert added_fill(statement, ["w"]) == added_fill(statement + " NULL", ["w"], explicit_timestamps=False)
    assert not added_fill(statement, ["w"]).unknown
    assert "explicit_defaults_for_timestamp" in added_fill(statement, ["w"], explicit_timestamps=False).unknown["w"]
