"""MySQL-target rules that need no server: which key columns compare by bytes, and when a target may hide a
generated invisible primary key. Version strings as MySQL 8.0.29/8.0.30/8.4.0 and MariaDB 10.11 print them for
`SELECT VERSION()` (sql_generate_invisible_primary_key is "Introduced 8.0.30" in the MySQL 8.0 manual)."""
import pytest

from cdc_assets.core.tables import Column, Kind
from cdc_assets.dbapi.mysql_flavour import MysqlFlavour
from cdc_assets.sinks.mysql import _is_text, kind_to_mysql


@pytest.mark.parametrize("version, gipk", [("8.0.29", False), ("8.0.30", True), ("8.4.0", True),
                                           ("10.11.19-MariaDB-0+deb12u1", False)])
def test_generated_invisible_primary_keys_from_8_0_30_on_mysql_only(version, gipk):
    assert MysqlFlavour.parse(version).generates_invisible_primary_keys is gipk


@pytest.mark.parametrize("column, text", [
    (Column("k", Kind.STRING, "character varying(10)", length=10), True),
    (Column("k", Kind.ENUM, "mood", values=("a", "A")), True),  # PostgreSQL labels 'a' and 'A' are two keys
    (Column("k", Kind.UUID, "uuid"), False),  # one canonical lowercase text: no collation can merge two
    (Column("k", Kind.INT, "integer", bits=32), False),
    (Column("k", Kind.DATETIME, "timestamp(6) without time zone", precision=6), False),
])
def test_postgres_key_columns_that_compare_by_bytes_in_a_mysql_target(column, text):
    assert _is_text(column, kind_to_mysql(column)) is text
