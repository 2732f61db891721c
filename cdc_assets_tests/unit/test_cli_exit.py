"""`cdc-assets` ends its process without the interpreter's teardown (cli.run): main's exit code, the atexit
handlers run, output flushed, a non-daemon thread finished first."""
import subprocess
import sys

PROGRAM = """
import atexit, sys, threading, time
import cdc_assets.cli as cli
atexit.register(lambda: print("atexit ran", flush=True))
threading.Thread(target=lambda: (time.sleep(0.3), print("thread done"))).start()
print("buffered, not flushed", end="")
sys.argv = ["cdc-assets", "--config", "/nonexistent/task.yaml", "positions"]
cli.run()
print("never")
"""


def test_run_exits_with_mains_code_after_atexit_and_threads():
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2  # main's: the config file does not exist
    assert "config file /nonexistent/task.yaml does not exist" in done.stderr
    assert done.stdout.startswith("buffered, not flushed")
    assert "thread done" in done.stdout and done.stdout.rstrip().endswith("atexit ran")
    assert "never" not in done.stdout
