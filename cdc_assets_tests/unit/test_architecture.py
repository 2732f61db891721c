"""The layering rules of pyproject.toml hold: only defs/ imports dagster, dependencies point one way."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept():
    result = subprocess.run([str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "3 kept, 0 broken" in result.stdout
