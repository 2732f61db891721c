"""A backfill launched from the Dagster UI, both ways: a Spark JVM per run (`spark.master: local[*]`) and every run
attached to a long-lived Spark Connect server (`spark.remote`).

    python bench/backfill.py [--rows 70000] [--dir /tmp/cdc-bench-backfill] [--ways local,connect]
                             [--backfill-interval S]

The case: two small MySQL tables (60% and 40% of --rows, 10 splits in all), `partitions_per_run: 3`,
into PostgreSQL. For each way: a fresh DAGSTER_HOME with the dagster.yaml the docs recommend, the splits registered
(`cdc-assets plan`), `dagster-webserver` and `dagster-daemon run` started on free ports as `dagster dev` starts them
(or, with --backfill-interval, `cdc-assets ui`, whose daemon looks at backfills every S s instead of every 30 s),
then the backfill of every split of both tables posted as the UI does (GraphQL `launchPartitionBackfill`); it
waits until the backfill and its runs end, checks the target holds every row, and prints wall time (from the
mutation to the last run's end: every row in the target, every split materialized; Dagster marks the backfill
completed at its daemon's next loop, printed too), rows/s, runs and peak RSS (the processes of the instance: webserver, daemon,
code servers, runs, their JVMs and Python workers; the Connect server's apart). The Connect server's start-up is
printed separately and not counted.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import dagster as dg
import yaml

from cdc_assets.core.tables import TableId
from cdc_assets.defs.names import partitions_name
from cdc_assets.dev.processes import free_port, stop_groups, wait_for
from cdc_assets.dev.servers import start_servers
from cdc_assets.dev.spark_connect import SparkConnectServer

TABLES = {"t_orders": 0.6, "t_items": 0.4}
SPLITS = 10
SHAPE = "id INT PRIMARY KEY, a INT, b VARCHAR(64), c DECIMAL(12,2), d DATETIME(6), e DOUBLE"
# What docs/operations/spark-connect.md recommends for many short runs: the run queue looked at every second instead of every 5 s (the
# backfill daemon launches a backfill's runs into the queue every 1 s, the queue's daemon dequeues them).
DAGSTER_YAML = {
    "run_queue": {"max_concurrent_runs": 4, "dequeue_interval_seconds": 1, "dequeue_use_threads": True,
                  "tag_concurrency_limits": [{"key": "cdc_assets/incremental_task",
                                              "value": {"applyLimitPerUniqueValue": True}, "limit": 1}]},
    "telemetry": {"enabled": False},
}


def seed(mariadb, rows: int) -> dict[str, int]:
    counts = {table: int(rows * share) for table, share in TABLES.items()}
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS bfsrc")
        cur.execute("USE bfsrc")
        for table, count in counts.items():
            cur.execute(f"CREATE TABLE IF NOT EXISTS {table} ({SHAPE})")
            cur.execute(f"SELECT COUNT(*) FROM {table}")
            if cur.fetchone()[0] != count:
                cur.execute(f"TRUNCATE {table}")
                cur.execute(f"INSERT INTO {table} SELECT seq, seq % 1000, CONCAT('text\\tof the row\\n', seq), seq / 100,"
                            f" TIMESTAMP('2024-01-01') + INTERVAL seq SECOND, seq / 7 FROM seq_1_to_{count}")
            cur.execute(f"ANALYZE TABLE {table}")  # the plan's row estimate: 10 splits in all
            cur.fetchall()
    conn.close()
    return counts


def write_config(base: Path, way: str, source_url: str, target_url: str, split_size: int, remote: str | None) -> Path:
    spark: dict = {"master": "local[*]"}
    if remote:
        spark["conf"] = {"spark.remote": remote}
    path = base / f"bf_{way}.yaml"
    path.write_text(yaml.safe_dump({
        "task_id": f"bf_{way}",
        "source": {"db_type": "mysql", "url": source_url, "tables": [f"bfsrc.{t}" for t in TABLES]},
        "target": {"db_type": "postgres", "url": target_url},
        "snapshot": {"split_size": split_size, "partitions_per_run": 3},
        "runtime": {"data_dir": str(base / f"state_{way}")},
        "spark": spark,
    }))
    return path


class Instance:
    """A Dagster instance with its webserver and daemon, each in its own process group."""

    def __init__(self, home: Path, config: Path, backfill_interval: float | None = None):
        self.home, self.port, self.backfill_interval = home, free_port(), backfill_interval
        self.env = {**os.environ, "DAGSTER_HOME": str(home), "CDC_ASSETS_CONFIG": str(config)}
        self.processes: list[subprocess.Popen] = []

    def start(self) -> Instance:
        if self.backfill_interval is not None:
            # `cdc-assets ui`: the webserver and a daemon whose backfill loop runs every `backfill_interval` s
            # (Dagster's own: 30 s, a constant it offers no setting for; defs/daemon.py).
            commands = {"ui": [sys.executable, "-m", "cdc_assets.cli", "--config", self.env["CDC_ASSETS_CONFIG"],
                               "ui", "--port", str(self.port), "--backfill-interval", str(self.backfill_interval)]}
        else:  # Dagster as it ships, started as `dagster dev` starts it
            workspace = self.home / "workspace.yaml"
            workspace.write_text(yaml.safe_dump({"load_from": [{"python_module": {
                "module_name": "cdc_assets.definitions", "location_name": "cdc_assets"}}]}))
            commands = {"webserver": ["dagster-webserver", "-h", "127.0.0.1", "-p", str(self.port),
                                      "-w", str(workspace)],
                        "daemon": ["dagster-daemon", "run", "-w", str(workspace)]}
        for name, args in commands.items():
            with (self.home / f"{name}.out").open("ab") as log:
                self.processes.append(subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                                       start_new_session=True, cwd=self.home))
        if not wait_for(self._location_loaded, 180):
            raise RuntimeError(f"the webserver did not load the code location; see {self.home}")
        return self

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/graphql", body,
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            answer = json.load(reply)
        if answer.get("errors"):
            raise RuntimeError(answer["errors"])
        return answer["data"]

    def _location_loaded(self) -> bool:
        try:
            data = self.graphql("{ workspaceOrError { ... on Workspace { locationEntries { name "
                                "locationOrLoadError { __typename } } } } }")
        except OSError:
            return False
        entries = data["workspaceOrError"]["locationEntries"]
        return bool(entries) and entries[0]["locationOrLoadError"]["__typename"] == "RepositoryLocation"

    def pids(self) -> list[int]:
        """Every live descendant of the webserver and the daemon (code servers, runs, JVMs, Python workers)."""
        children: dict[int, list[int]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            parent = int(text[text.rindex(")") + 2:].split()[1])
            children.setdefault(parent, []).append(int(stat.parent.name))
        found, todo = [], [p.pid for p in self.processes]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo += children.get(pid, [])
        return found

    def stop(self) -> None:
        pids = self.pids()
        stop_groups(self.processes, grace=20)
        for pid in pids:  # runs that left their group (a run worker is its own session leader)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class PeakRss:
    """The largest sum of RSS over a set of processes, sampled every 0.2 s."""

    def __init__(self, pids):
        self.pids, self.peak, self._stop = pids, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._stop.wait(0.2):
            total = 0
            for pid in self.pids():
                try:
                    total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
                except (OSError, IndexError):
                    pass
            self.peak = max(self.peak, total)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


LAUNCH = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message }
  ... on PartitionSetNotFoundError { message } ... on UnauthorizedError { message } } }"""
STATUS = """query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill {
  status runs { runId status startTime endTime } } } }"""
DONE = {"COMPLETED", "FAILED", "CANCELED", "COMPLETED_SUCCESS", "COMPLETED_FAILED"}
RUN_ENDED = {"SUCCESS", "FAILURE", "CANCELED"}


def backfill(instance: Instance, task_id: str, splits: dict[str, list[str]]) -> tuple[float, list[dict]]:
    """Every split of every table, as the UI's "Materialize" on the selected assets' partitions posts it."""
    params = {"partitionsByAssets": [
        {"assetKey": {"path": [task_id, "bfsrc", table]}, "partitions": {"range": {"start": keys[0], "end": keys[-1]}}}
        for table, keys in splits.items()]}
    started, wall = time.monotonic(), time.time()
    answer = instance.graphql(LAUNCH, {"params": params})["launchPartitionBackfill"]
    if answer["__typename"] != "LaunchBackfillSuccess":
        raise RuntimeError(answer)
    backfill_id = answer["backfillId"]
    while True:
        state = instance.graphql(STATUS, {"id": backfill_id})["partitionBackfillOrError"]
        runs = state["runs"]
        if state["status"] in DONE and all(r["status"] in RUN_ENDED for r in runs):
            break
        if time.monotonic() - started > 1800:
            raise RuntimeError(f"backfill {backfill_id} still {state['status']} after 30 min: {runs}")
        time.sleep(1.0)  # each poll is a GraphQL query the webserver answers on the same 2 cores
    took = time.monotonic() - started
    runs = [{**r, "from_launch": (r["startTime"] - wall, r["endTime"] - wall)} for r in runs]
    if state["status"] not in ("COMPLETED", "COMPLETED_SUCCESS") or any(r["status"] != "SUCCESS" for r in runs):
        raise RuntimeError(f"backfill {backfill_id} ended {state['status']}: {runs}; see {instance.home}")
    return took, runs


def target_rows(postgres, table: str) -> int:
    conn = postgres.connect("bfwarehouse")
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM bfsrc.{table}")
        count = cur.fetchone()[0]
    conn.close()
    return count


def run_way(way: str, base: Path, mariadb, postgres, counts: dict[str, int], split_size: int,
            remote: str | None, backfill_interval: float | None) -> dict:
    conn = postgres.connect("bfwarehouse")
    with conn.cursor() as cur:
        cur.execute("DROP SCHEMA IF EXISTS bfsrc CASCADE")
    conn.close()
    home = base / f"dagster_home_{way}"
    for stale in (home, base / f"state_{way}"):
        shutil.rmtree(stale, ignore_errors=True)
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(DAGSTER_YAML))
    config = write_config(base, way, mariadb.url("bfsrc"), postgres.url("bfwarehouse"), split_size, remote)
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    subprocess.run([sys.executable, "-m", "cdc_assets.cli", "--config", str(config), "plan"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    with dg.DagsterInstance.from_config(str(home)) as dagster_instance:
        splits = {table: sorted(dagster_instance.get_dynamic_partitions(
            partitions_name(f"bf_{way}", TableId("bfsrc", table)))) for table in TABLES}
    instance = Instance(home, config, backfill_interval).start()
    try:
        with PeakRss(instance.pids) as rss:
            took, runs = backfill(instance, f"bf_{way}", splits)
    finally:
        instance.stop()
    for table, count in counts.items():
        got = target_rows(postgres, table)
        if got != count:
            raise RuntimeError(f"{way}: bfsrc.{table} has {got} rows in the target, the source {count}")
    rows = sum(counts.values())
    spans = sorted(r["from_launch"] for r in runs)
    # The rows are in the target and every split shows materialized once the last run ended; Dagster marks the
    # backfill itself completed at its daemon's next loop (polled here once a second).
    return {"way": way, "seconds": max(e for _, e in spans), "marked_done": took, "rows": rows, "runs": len(runs), "splits": sum(map(len, splits.values())),
            "rss": rss.peak, "run_seconds": sum(e - s for s, e in spans) / len(spans),
            "first_start": spans[0][0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=70_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/cdc-bench-backfill"))
    parser.add_argument("--ways", default="local,connect")
    parser.add_argument("--backfill-interval", type=float, default=None,
                        help="start the instance with `cdc-assets ui --backfill-interval S` (its default: 1 s) "
                             "instead of dagster-webserver and dagster-daemon as Dagster ships them (30 s)")
    args = parser.parse_args()
    base = args.dir.resolve()
    mariadb, postgres = start_servers(base)
    postgres.create_database("bfwarehouse")
    counts = seed(mariadb, args.rows)
    split_size = -(-args.rows // SPLITS)
    results = {}
    for way in args.ways.split(","):
        server = None
        if way == "connect":
            started = time.monotonic()
            server = SparkConnectServer(base / "connect-server").start()
            # The first session of a server pays its JVM's class loading and JIT: done here, as a long-lived
            # server has long since done it when the UI launches a backfill.
            from cdc_assets.spark.session import attach_session
            session, _ = attach_session({"spark.remote": server.url})
            session.range(4).collect()
            session.stop()
            print(f"connect server start-up (not counted): {time.monotonic() - started:.1f} s", flush=True)
        try:
            r = results[way] = run_way(way, base, mariadb, postgres, counts, split_size,
                                       server.url if server else None, args.backfill_interval)
        finally:
            if server is not None:
                server.stop()
        print(f"{way:8} backfill of {r['splits']} splits, {r['rows']:,} rows: {r['seconds']:.1f} s, "
              f"{r['rows'] / r['seconds']:,.0f} rows/s, {r['runs']} runs (avg {r['run_seconds']:.1f} s each; first "
              f"started at {r['first_start']:.1f} s; backfill marked completed at {r['marked_done']:.1f} s), "
              f"peak RSS {r['rss'] / 2**20:,.0f} MiB", flush=True)
    if "local" in results and "connect" in results:
        print(f"speed-up connect/local: {results['local']['seconds'] / results['connect']['seconds']:.1f}x")


if __name__ == "__main__":
    main()
