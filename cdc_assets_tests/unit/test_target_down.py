"""Which target errors the sync retries as a lost connection (`engine.target_down.connection_lost`)."""
import pymysql

from cdc_assets.engine.target_down import connection_lost


def test_a_mysql_transaction_the_server_asks_to_retry_is_retried():
    for code, text in ((1213, "Deadlock found when trying to get lock; try restarting transaction"),
                       (1412, "Table definition has changed, please retry transaction")):
        lost = connection_lost(pymysql.err.OperationalError(code, text))
        assert lost is not None and text in lost.message


def test_a_change_the_target_refused_is_not_retried():
    assert connection_lost(pymysql.err.IntegrityError(1062, "Duplicate entry '1' for key 'PRIMARY'")) is None
    assert connection_lost(pymysql.err.OperationalError(1366, "Incorrect integer value")) is None
