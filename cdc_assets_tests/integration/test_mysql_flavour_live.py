"""Detection against a real MariaDB, and the position read with the statement the flavour chose."""
from cdc_assets.core.urls import DbUrl
from cdc_assets.dbapi.mysql_flavour import detect
from cdc_assets.sources.mysql.source import MysqlSource


def test_the_private_mariadb_is_detected_and_its_position_read(servers):
    conn = servers.mariadb.connect()
    try:
        flavour = detect(conn)
        with conn.cursor() as cur:
            cur.execute(flavour.binlog_status_sql)
            file, offset = cur.fetchone()[:2]
            cur.execute("SELECT @@GLOBAL.gtid_binlog_pos")
            gtid = cur.fetchone()[0]
    finally:
        conn.close()
    assert flavour.mariadb and flavour.at_least(10, 5)
    source = MysqlSource(DbUrl.parse(servers.mariadb.url()))
    try:
        position = source.current_position()
    finally:
        source.close()
    assert position.file == file and position.pos >= offset
    assert position.gtid_set == gtid
