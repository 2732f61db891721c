"""One target whose sessions the server ended (a restart, a failover, an administrator's pg_terminate_backend): the
next batch finds its connection gone, and the sync reconnects and retries with backoff, as it does for a target
that does not answer, instead of failing with the driver's error."""
from cdc_assets.engine.incremental import sync
from cdc_assets_tests.support import execute, fetch_rows, mysql_table_task


def _end_sessions(tgt, database: str) -> int:
    with tgt.cursor() as cur:
        cur.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()", (database,))
        return cur.fetchone()[0]


def test_a_single_target_whose_sessions_ended_is_reconnected(servers, unique_name, tmp_path):
    with mysql_table_task(servers, unique_name, tmp_path, "lost", {"retry_backoff_secs": 0.1}) as (_, rt, src, tgt):
        sync(rt, until_caught_up=True)
        execute(src, "INSERT INTO t VALUES (1, 1)")
        sync(rt, until_caught_up=True)  # the target's connections are open, and stay so between syncs
        assert _end_sessions(tgt, f"{unique_name}_tgt") > 0
        execute(src, "INSERT INTO t VALUES (2, 2)", "UPDATE t SET v = 10 WHERE id = 1")
        report = sync(rt, until_caught_up=True)
        assert fetch_rows(tgt, f'"{unique_name}".t', "id") == [(1, 10), (2, 2)]
        assert report.retries >= 1
