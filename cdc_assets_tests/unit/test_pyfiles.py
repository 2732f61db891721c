"""The zip a cluster's executors import cdc_assets from: the whole package, importable, built once."""
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import cdc_assets
from cdc_assets.spark.pyfiles import is_local, package_zip


def test_the_zip_holds_every_module_of_the_package_and_imports_alone(tmp_path):
    package = Path(cdc_assets.__file__).parent
    names = set(zipfile.ZipFile(package_zip()).namelist())
    modules = {f"cdc_assets/{p.relative_to(package).as_posix()}" for p in package.rglob("*.py")}
    assert modules <= names and all(name.endswith(".py") for name in names)
    # Another interpreter, with the zip first on its path (as a Python worker has it), finds cdc_assets there.
    found = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(1, sys.argv[1]); "
                            "import cdc_assets.core.read_limit, cdc_assets; print(cdc_assets.__file__)",
                            str(package_zip())], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert found.stdout.strip() == f"{package_zip()}/cdc_assets/__init__.py"
    assert package_zip() is package_zip()


@pytest.mark.parametrize("master, local", [("local", True), ("local[*]", True), ("local[2,3]", True),
                                           ("spark://127.0.0.1:7077", False), ("yarn", False),
                                           ("local-cluster[2,1,1024]", False)])
def test_only_local_masters_skip_the_zip(master, local):
    assert is_local(master) is local
