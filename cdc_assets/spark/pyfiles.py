"""Our package as a zip for the executors' Python workers, when the master is a cluster.

TaskExport/TaskWrite functions, the COPY writer's partition function and the pacing of `snapshot.read_limit` are
pickled by reference to `cdc_assets` modules, so every Python worker imports `cdc_assets`. In local mode the
workers are children of this process and import it from where the driver does; an executor on another host has
no such copy, or an older one. `SparkContext.addPyFile` ships the zip to each executor and puts it first on its
workers' `sys.path` (before any installed copy), so executors run exactly the driver's code. The driver imported
`cdc_assets` already: its submodules keep coming from the driver's own copy (a package's `__path__`, not
`sys.path`, finds them).
"""
from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
import zipfile
from functools import cache
from pathlib import Path

import cdc_assets
from cdc_assets.spark.parallelism import is_remote

ZIP_NAME = "cdc_assets.zip"


@cache
def package_zip() -> Path:
    """`cdc_assets.zip` (the package's .py files), built once per process in a temp folder removed at exit: the
    driver serves it to executors as long as its SparkContext lives, and the code it holds cannot change under a
    running process."""
    package = Path(cdc_assets.__file__).resolve().parent
    folder = Path(tempfile.mkdtemp(prefix="cdc_assets-pyfiles-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / ZIP_NAME
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for source in sorted(package.rglob("*.py")):
            archive.write(source, source.relative_to(package.parent).as_posix())
    return path


@cache
def package_digest() -> str:
    """The zip's SHA-256: which code a run ships (the zip is built the same from the same files)."""
    return hashlib.sha256(package_zip().read_bytes()).hexdigest()


def is_local(master: str) -> bool:
    """`local`, `local[N]`, `local[*]`, `local[N,F]`: the executor is this process's JVM, its Python workers are
    children of this interpreter."""
    return master == "local" or master.startswith("local[")


def ship_package(session) -> None:
    """Ship the package to the executors of a session whose master is not local (see the module docstring); to
    a Spark Connect server as the session's Python artifact (the server's workers, on whatever host, import it
    from the session's own folder, first on their `sys.path`)."""
    if is_remote(session):
        session.addArtifacts(str(package_zip()), pyfile=True)
    elif not is_local(session.sparkContext.master):
        session.sparkContext.addPyFile(str(package_zip()))
