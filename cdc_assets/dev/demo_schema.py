"""The demo schema: four MariaDB tables, varied types, one string key and one composite key.

Rows come from MariaDB's SEQUENCE engine (`seq_1_to_N`), so seeding 200k rows takes about a second.
"""
from __future__ import annotations

DATABASE = "shop"
TABLES = ["shop.customers", "shop.orders", "shop.products", "shop.order_items"]


def ddl() -> list[str]:
    return [
        f"CREATE DATABASE IF NOT EXISTS {DATABASE} CHARACTER SET utf8mb4",
        """CREATE TABLE IF NOT EXISTS shop.customers (
             id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, email VARCHAR(128), balance DECIMAL(12,2),
             vip TINYINT(1) NOT NULL DEFAULT 0, created_at DATETIME(6) NOT NULL, notes TEXT)""",
        """CREATE TABLE IF NOT EXISTS shop.orders (
             id BIGINT UNSIGNED PRIMARY KEY, customer_id INT NOT NULL, amount DECIMAL(12,2) NOT NULL,
             status ENUM('new','paid','shipped','cancelled') NOT NULL, ratio DOUBLE, ordered_at TIMESTAMP(6) NULL,
             note VARCHAR(255), flags BIT(8))""",
        """CREATE TABLE IF NOT EXISTS shop.products (
             sku VARCHAR(32) PRIMARY KEY, title VARCHAR(200) NOT NULL, price DECIMAL(10,2) NOT NULL,
             attrs JSON, added DATE, photo BLOB)""",
        """CREATE TABLE IF NOT EXISTS shop.order_items (
             order_id BIGINT UNSIGNED NOT NULL, line_no SMALLINT NOT NULL, sku VARCHAR(32) NOT NULL,
             qty INT NOT NULL, price DECIMAL(10,2) NOT NULL, PRIMARY KEY (order_id, line_no))""",
    ]


def seed(rows: int) -> list[str]:
    """`rows` orders; customers, products and order items scale with it (total about 1.6 x rows)."""
    customers, products = max(rows // 10, 10), max(rows // 20, 10)
    items_orders = max(rows // 4, 10)
    return [
        f"""INSERT IGNORE INTO shop.customers
            SELECT seq, CONCAT('customer ', seq, IF(seq % 97 = 0, ' 🚀', '')), IF(seq % 11 = 0, NULL, CONCAT('c', seq, '@example.com')),
                   (seq % 100000) / 100, seq % 7 = 0, TIMESTAMP('2024-01-01') + INTERVAL seq SECOND + INTERVAL seq % 999983 MICROSECOND,
                   IF(seq % 5 = 0, REPEAT('note ', seq % 40), NULL)
            FROM seq_1_to_{customers}""",
        f"""INSERT IGNORE INTO shop.orders
            SELECT seq, 1 + seq % {customers}, (seq % 99991) / 10, ELT(1 + seq % 4, 'new','paid','shipped','cancelled'),
                   seq / 7, TIMESTAMP('2024-06-01') + INTERVAL seq * 3 SECOND, IF(seq % 3 = 0, NULL, CONCAT('order #', seq)),
                   seq % 256
            FROM seq_1_to_{rows}""",
        f"""INSERT IGNORE INTO shop.products
            SELECT CONCAT('SKU-', LPAD(HEX(seq * 7919 % 1048576), 6, '0'), '-', seq), CONCAT('product ', seq), 1 + (seq % 5000) / 7,
                   JSON_OBJECT('color', ELT(1 + seq % 3, 'red', 'green', 'blue'), 'size', seq % 50),
                   DATE('2020-01-01') + INTERVAL seq % 2000 DAY, IF(seq % 4 = 0, UNHEX(MD5(seq)), IF(seq % 4 = 1, '', NULL))
            FROM seq_1_to_{products}""",
        f"""INSERT IGNORE INTO shop.order_items
            SELECT o.seq, l.seq, CONCAT('SKU-', o.seq % 1000), 1 + (o.seq + l.seq) % 5, 1 + (o.seq * l.seq % 9000) / 10
            FROM seq_1_to_{items_orders} o JOIN seq_1_to_{2} l""",
    ]


def changes(rows: int) -> list[str]:
    """A day of business after the snapshot, in transactions: what `sync` carries to the target."""
    return [
        f"""INSERT INTO shop.orders SELECT {rows} + seq, 1 + seq % 10, seq, 'new', NULL, NOW(6), 'after the snapshot', 1
            FROM seq_1_to_500 ON DUPLICATE KEY UPDATE amount = amount + 1""",
        "UPDATE shop.orders SET status = 'paid', flags = flags | 2 WHERE id % 50 = 0",
        "DELETE FROM shop.order_items WHERE order_id % 40 = 0",
        "UPDATE shop.customers SET vip = 1, balance = balance + 10 WHERE id % 13 = 0",
        "UPDATE shop.products SET attrs = JSON_SET(attrs, '$.size', 99) WHERE price > 500",
    ]
