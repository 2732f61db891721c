"""`cdc-assets ui`: a Dagster webserver and daemon on the task's instance, as `dagster dev` starts them, with the
backfill daemon looking at backfills every second. A backfill posted as the UI posts it (GraphQL
`launchPartitionBackfill`) over every split runs to the end and the target equals the source row by row; the
daemon says which loop it runs; SIGTERM stops both processes."""
import json
import os
import signal
import subprocess
import time
import urllib.request

import dagster as dg
import pytest

from cdc_assets.core.tables import TableId
from cdc_assets.defs.names import partitions_name
from cdc_assets.dev.processes import free_port, wait_for
from cdc_assets_tests.support import cli_command, fetch_rows, write_config

pytestmark = pytest.mark.spark  # the backfill's run starts a Spark session

LAUNCH = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""
STATUS = """query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill {
  status runs { runId status } } } }"""
LOCATION = "{ workspaceOrError { ... on Workspace { locationEntries { locationOrLoadError { __typename } } } } }"


def graphql(port: int, query: str, variables: dict | None = None) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        answer = json.load(reply)
    assert not answer.get("errors"), answer["errors"]
    return answer["data"]


def children_of(parent: int) -> list[int]:
    found = []
    for stat in os.listdir("/proc"):
        try:
            text = open(f"/proc/{stat}/stat").read() if stat.isdigit() else ""
        except OSError:
            continue
        if text and int(text[text.rindex(")") + 2:].split()[1]) == parent:
            found.append(int(stat))
    return found


def alive(pid: int) -> bool:
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def location_loaded(port: int) -> bool:
    try:
        entries = graphql(port, LOCATION)["workspaceOrError"]["locationEntries"]
    except OSError:
        return False
    return bool(entries) and entries[0]["locationOrLoadError"]["__typename"] == "RepositoryLocation"


def test_a_ui_backfill_of_every_split_completes_and_sigterm_stops_the_ui(tmp_path, servers, unique_name):
    servers.mariadb.create_database(unique_name)
    src = servers.mariadb.connect(unique_name)
    with src.cursor() as cur:
        cur.execute("CREATE TABLE m (id INT PRIMARY KEY, v VARCHAR(20), d DATETIME(6))")
        cur.execute("INSERT INTO m SELECT seq, CONCAT('v\\t', seq), TIMESTAMP('2024-01-01') + INTERVAL seq SECOND "
                    "FROM seq_1_to_1200")
        cur.execute("ANALYZE TABLE m")
    target = f"{unique_name}_tgt"
    servers.postgres.create_database(target)
    config = write_config(tmp_path, servers, task_id="ui_flow", source="mysql", source_db=unique_name,
                          tables=[f"{unique_name}.m"], target="postgres", target_db=target,
                          snapshot={"split_size": 400, "partitions_per_run": 2})
    home = tmp_path / "dagster_home"
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    subprocess.run(cli_command(config, "plan"), env=env, check=True, stdout=subprocess.DEVNULL)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        keys = sorted(instance.get_dynamic_partitions(partitions_name("ui_flow", TableId(unique_name, "m"))))
    assert len(keys) >= 3

    port = free_port()
    ui = subprocess.Popen(cli_command(config, "ui", "--port", str(port)), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert wait_for(lambda: location_loaded(port) or ui.poll() is not None, 180), "the UI did not load the task"
        assert ui.poll() is None, ui.stdout.read()
        params = {"partitionsByAssets": [{"assetKey": {"path": ["ui_flow", unique_name, "m"]},
                                          "partitions": {"range": {"start": keys[0], "end": keys[-1]}}}]}
        answer = graphql(port, LAUNCH, {"params": params})["launchPartitionBackfill"]
        assert answer["__typename"] == "LaunchBackfillSuccess", answer

        def ended() -> bool:
            state = graphql(port, STATUS, {"id": answer["backfillId"]})["partitionBackfillOrError"]
            return state["status"] in ("COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED") \
                and all(r["status"] in ("SUCCESS", "FAILURE", "CANCELED") for r in state["runs"])

        assert wait_for(ended, 400), f"the backfill did not end; see {home}/daemon.log"
        state = graphql(port, STATUS, {"id": answer["backfillId"]})["partitionBackfillOrError"]
        assert state["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), state
        assert len(state["runs"]) == -(-len(keys) // 2) and {r["status"] for r in state["runs"]} == {"SUCCESS"}
        assert "looks at backfills every 1 s (Dagster's own: 30 s)" in (home / "daemon.log").read_text()
        children = children_of(ui.pid)
        assert len(children) == 2  # the webserver and the daemon
    finally:
        os.kill(ui.pid, signal.SIGTERM)
        code = ui.wait(timeout=60)
        output = ui.stdout.read()
    assert code == 0, output
    assert f"Dagster UI at http://127.0.0.1:{port}" in output
    time.sleep(0.5)
    assert not [p for p in children if alive(p)], "the webserver or the daemon outlived `cdc-assets ui`"
    tgt = servers.postgres.connect(target)
    want = fetch_rows(src, "m", "id")
    got = fetch_rows(tgt, f"{unique_name}.m", "id")
    assert len(got) == 1200 and got == want
