"""Screenshots of the Dagster UI for the docs, taken from a running demo by headless Chromium.

    python scripts/screenshots.py [--dir .cdc-demo] [--out docs/assets/screenshots]

Runs `cdc-assets demo --dir DIR` first when DIR holds no demo yet (its servers are then stopped at the end), starts
`cdc-assets ui` on a free port in DIR, launches a backfill of one table's splits as the UI's "Materialize" does
(GraphQL `launchPartitionBackfill`), waits for it and for the sensors' first ticks, then saves one PNG per page
listed in PAGES. Needs `chromium` (Debian: `apt-get install -y chromium`). The PNGs are written as 8-bit palettes
when Pillow is installed, to keep the repository small.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK = "demo_shop"  # the demo's task_id (cdc_assets/dev/demo.py)
ORDERS = f"{TASK}/shop/orders"
# (file name, path in the UI): what the getting-started walkthrough shows. The partitions page is taken before the
# backfill, so that it shows the demo snapshot's own materialization of the split (rows, watermarks, rows/s).
BEFORE_BACKFILL = [
    ("partitions.png", f"/assets/{ORDERS}?view=partitions&partition=shop.orders%3A0001"),
]
PAGES = [
    ("assets.png", f"/asset-groups/{TASK}"),
    ("checks.png", f"/assets/{ORDERS}?view=checks&checkDetail=table_matches_source"),
    ("backfill.png", "/runs/b/{backfill}?tab=runs"),
    ("sensor.png", f"/locations/cdc_assets/sensors/{TASK}_incremental_launcher"),
    ("runs.png", "/runs"),
]
LAUNCH = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""
STATUS = """query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill {
  status } } }"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=".cdc-demo", help="the demo's folder (default .cdc-demo)")
    parser.add_argument("--out", default=str(ROOT / "docs/assets/screenshots"), help="where the PNGs go")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=760)
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        print("no chromium on PATH: apt-get install -y chromium", file=sys.stderr)
        return 1
    demo = Path(args.dir).resolve()
    started_demo = not (demo / "cdc_assets.yaml").exists()
    if started_demo:
        subprocess.run([sys.executable, "-m", "cdc_assets.cli", "demo", "--dir", str(demo)], check=True)
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(demo / "dagster_home")}
    ui = subprocess.Popen([sys.executable, "-m", "cdc_assets.cli", "ui", "--port", str(port)], cwd=demo, env=env,
                          start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for(lambda: urllib.request.urlopen(f"{base}/server_info", timeout=2), "the webserver", 120)
        _wait_for(lambda: _location_loaded(base), "the code location", 180)
        _graphql(base, "mutation { setNuxSeen }")  # the community pop-up's "Skip", which would hide every page
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for name, path in BEFORE_BACKFILL:
            _shoot(browser, base + path, out / name, args.width, args.height)
            print(f"{out / name}: {(out / name).stat().st_size // 1024} KB")
        backfill = _backfill(base, demo)
        time.sleep(20)  # the sensors' first ticks (every 15 s)
        for name, path in PAGES:
            _shoot(browser, base + path.format(backfill=backfill), out / name, args.width, args.height)
            print(f"{out / name}: {(out / name).stat().st_size // 1024} KB")
    finally:
        os.killpg(ui.pid, signal.SIGTERM)
        ui.wait(timeout=60)
        if started_demo:
            subprocess.run([sys.executable, "-m", "cdc_assets.dev.servers", "stop", str(demo / "servers")])
    return 0


def _graphql(base: str, query: str, variables: dict | None = None) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(f"{base}/graphql", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())["data"]


def _location_loaded(base: str) -> bool:
    data = _graphql(base, "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }")
    entries = data["workspaceOrError"]["locationEntries"]
    if not entries or any(e["loadStatus"] != "LOADED" for e in entries):
        raise RuntimeError("not loaded yet")
    return True


def _backfill(base: str, demo: Path) -> str:
    """Every split of shop.orders, as the asset's Materialize button posts them; finished splits are skipped."""
    plan = json.loads((demo / "state/plans" / TASK / "shop.orders.json").read_text())
    splits = [f"shop.orders:{i:04d}" for i in range(len(plan["estimated_rows"]))]
    params = {"partitionsByAssets": [{"assetKey": {"path": ORDERS.split("/")},
                                      "partitions": {"range": {"start": splits[0], "end": splits[-1]}}}]}
    answer = _graphql(base, LAUNCH, {"params": params})["launchPartitionBackfill"]
    if answer["__typename"] != "LaunchBackfillSuccess":
        raise RuntimeError(answer)
    backfill = answer["backfillId"]
    _wait_for(lambda: _graphql(base, STATUS, {"id": backfill})["partitionBackfillOrError"]["status"]
              in ("COMPLETED", "COMPLETED_SUCCESS") or _raise(), "the backfill", 600)
    return backfill


def _raise() -> bool:
    raise RuntimeError("not yet")


def _shoot(browser: str, url: str, file: Path, width: int, height: int) -> None:
    subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={width},{height}", "--virtual-time-budget=20000", f"--screenshot={file}", url],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=180)
    try:
        from PIL import Image
    except ImportError:
        return
    Image.open(file).convert("RGB").quantize(colors=128).save(file, optimize=True)


def _wait_for(probe, what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if probe():
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready after {seconds:.0f} s")
        time.sleep(1.0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    sys.exit(main())
