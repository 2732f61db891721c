"""Settled servers before a timed bench case: what one case (or the seed, or the backlog) left for the servers to do in
the background (dirty buffers, an autovacuum, InnoDB's purge) is done before the next case starts, not during it."""
from __future__ import annotations

import time

QUIET_WAIT_SECS = 60


def quiet(mariadb, postgres) -> None:
    """Let both servers settle before a timed case, so that no case pays for what the case before it (or the seed)
    left behind: PostgreSQL writes its dirty buffers now (CHECKPOINT) and no autovacuum runs, MariaDB's buffer pool
    has no dirty pages left and its purge has nothing queued."""
    started = time.monotonic()
    conn = postgres.connect()
    with conn.cursor() as cur:
        while time.monotonic() - started < QUIET_WAIT_SECS:
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")
            if cur.fetchone()[0] == 0:
                break
            time.sleep(0.2)
        cur.execute("CHECKPOINT")  # after the autovacuum: what it dirtied is written too
    conn.close()
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("SELECT @@innodb_max_dirty_pages_pct")
        (saved,) = cur.fetchone()
        cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")
        try:
            while time.monotonic() - started < QUIET_WAIT_SECS:
                cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN "
                            "('Innodb_buffer_pool_pages_dirty', 'Innodb_history_list_length')")
                if all(int(value) == 0 for _, value in cur.fetchall()):
                    break
                time.sleep(0.2)
        finally:
            cur.execute(f"SET GLOBAL innodb_max_dirty_pages_pct = {float(saved)}")
    conn.close()
