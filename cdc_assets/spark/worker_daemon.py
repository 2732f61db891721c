"""PySpark's Python worker daemon (`spark.python.daemon.module`, local masters only: session.py), importing PySpark
from its installed copy instead of from `$SPARK_HOME/python/lib/pyspark.zip`.

The JVM puts that zip and py4j's first on the daemon's path. For a pip-installed PySpark, SPARK_HOME is the
installed package itself and the zip a copy of it without bytecode: the daemon compiled PySpark's sources at every
start, and each worker it forked compiled the modules it imports next (docs/architecture/spark-driver.md). Behind the installed copy, the same files load from their cached bytecode. Any other layout
(a Spark distribution's SPARK_HOME, whose zip is not the installed package) keeps the path the JVM gave.

Imports nothing before the path is settled: `cdc_assets` and `cdc_assets.spark` are empty packages.
"""
import os
import sys


def installed_first(path: list[str], spark_home: str, cwd: str) -> list[str]:
    """`path` with SPARK_HOME's zips moved to its end, when the first PySpark found on the rest is SPARK_HOME
    itself; otherwise `path` unchanged."""
    if not spark_home:
        return path
    lib = os.path.join(spark_home, "python", "lib") + os.sep
    zips = [entry for entry in path if entry.startswith(lib) and entry.endswith(".zip")]
    rest = [entry for entry in path if entry not in zips]
    for entry in rest:
        package = os.path.join(entry or cwd, "pyspark")
        if os.path.isfile(os.path.join(package, "__init__.py")):
            same = os.path.realpath(package) == os.path.realpath(spark_home)
            return rest + zips if same and zips else path
    return path


if __name__ == "__main__":
    sys.path[:] = installed_first(sys.path, os.environ.get("SPARK_HOME", ""), os.getcwd())
    from pyspark.daemon import manager

    manager()
