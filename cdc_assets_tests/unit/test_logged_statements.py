"""Which captured tables a DML statement logged as text (binlog_format STATEMENT/MIXED) writes."""
import pytest

from cdc_assets.core.positions import MysqlPosition
from cdc_assets.core.tables import TableId
from cdc_assets.sources.mysql.logged_statements import dml_tables, logged_as_statement, statement_verb

SHOP, OTHER = TableId("shop", "orders"), TableId("shop", "other")
CAPTURED = {SHOP, TableId("shop", "items")}


@pytest.mark.parametrize("statement, expected", [
    ("UPDATE orders SET v = 1 WHERE id = 2", [SHOP]),
    ("update `shop`.`orders` set v = 1", [SHOP]),
    ("UPDATE LOW_PRIORITY IGNORE shop . orders SET v = 1", [SHOP]),
    ("/* app:42 */ UPDATE orders SET v = 1", [SHOP]),
    ("-- note\nDELETE FROM orders WHERE id = 2", [SHOP]),
    ("# note\nREPLACE INTO orders VALUES (1, 2)", [SHOP]),
    ("INSERT INTO orders (id, v) VALUES (1, 2)", [SHOP]),
    ("INSERT IGNORE orders VALUES (1, 2)", [SHOP]),
    ("INSERT /*! HIGH_PRIORITY */ INTO orders VALUES (1, 2)", [SHOP]),
    ('INSERT INTO "orders" VALUES (1)', [SHOP]),  # ANSI_QUOTES
    ("INSERT INTO other SELECT * FROM orders", []),  # reads a captured table, writes another
    ("INSERT INTO orders SELECT * FROM other", [SHOP]),
    ("INSERT INTO ORDERS VALUES (1)", [SHOP]),  # lower_case_table_names=1 servers accept any case
    ("INSERT INTO shop.items VALUES (1)", [TableId("shop", "items")]),
    ("INSERT INTO elsewhere.orders VALUES (1)", []),
    ("UPDATE other SET v = (SELECT MAX(v) FROM orders)", []),
    ("UPDATE other o JOIN orders x ON o.id = x.id SET o.v = x.v", []),
    ("UPDATE other o JOIN orders x ON o.id = x.id SET x.v = o.v, o.w = 1", [SHOP]),
    ("UPDATE other o JOIN orders x ON o.id = x.id SET v = 1", [SHOP]),  # unqualified: may be either
    ("UPDATE other o JOIN orders x ON o.id = x.id SET o.v = x.v WHERE x.id = 1", []),
    ("UPDATE other, shop.orders SET orders.v = 1", [SHOP]),
    ("DELETE FROM other WHERE id IN (SELECT id FROM orders)", []),
    ("DELETE o FROM orders o JOIN other x ON o.id = x.id", [SHOP]),
    ("DELETE x FROM orders o JOIN other x ON o.id = x.id", []),
    ("DELETE QUICK FROM o.* USING orders AS o LEFT JOIN other USING (id)", [SHOP]),
    ("DELETE FROM items, orders USING items JOIN orders JOIN other", [TableId("shop", "items"), SHOP]),
    ("LOAD DATA LOCAL INFILE '/tmp/x INTO TABLE other' REPLACE INTO TABLE orders FIELDS TERMINATED BY ','", [SHOP]),
    ("WITH c AS (SELECT id FROM orders) UPDATE other JOIN c USING (id) SET other.v = 1", []),
    ("WITH c AS (SELECT id FROM other) DELETE orders FROM orders JOIN c USING (id)", [SHOP]),
    ("ALTER TABLE orders ADD COLUMN c INT", []),  # DDL is handled elsewhere
    ("TRUNCATE orders", []),
    ("SELECT * FROM orders", []),
    ("UPDATE elsewhere.t SET v = 'UPDATE orders SET v = 1'", []),  # text inside a string
])
def test_the_captured_tables_a_statement_writes(statement, expected):
    assert dml_tables(statement, "shop", CAPTURED) == expected


def test_an_unqualified_name_belongs_to_the_events_default_database():
    assert dml_tables("UPDATE orders SET v = 1", "other_db", CAPTURED) == []
    assert dml_tables("UPDATE orders SET v = 1", "SHOP", CAPTURED) == [SHOP]


def test_the_stop_names_table_position_setting_and_way_out_but_not_the_statement():
    statement = "UPDATE orders SET secret = 'hunter2'"
    error = logged_as_statement(dml_tables(statement, "shop", CAPTURED), statement_verb(statement),
                                MysqlPosition("mysql-bin.000003", 1234), "mysql://cdc:***@db:3306")
    text = str(error)
    assert "shop.orders" in text and "mysql-bin.000003:1234" in text and "an UPDATE" in text
    assert "binlog_format=ROW" in error.hint and "re-snapshot shop.orders" in error.hint
    assert "hunter2" not in text
