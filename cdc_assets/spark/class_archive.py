"""Spark's classes from a class archive (the JDK's dynamic class data sharing, JEP 350): a driver JVM that maps the
classes an earlier driver loaded starts in about half the time, with the C1-only JIT of session.py (docs/architecture/spark-driver.md).

The first driver on a machine (per JDK, pyspark and jar list) writes the archive when its JVM exits; later
drivers map it. A JVM whose archive does not match (another JDK, a changed class path) says so and starts without
it, as it would with none (-Xshare:auto, the default): the archive only ever saves time. It is written to a file of
its own, renamed into place once the JVM exited cleanly, so that no driver maps a half-written one.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import shutil
from pathlib import Path

ARCHIVE_DIR_ENV = "CDC_ASSETS_CLASS_ARCHIVE_DIR"  # where archives live; "off" for none
_WAIT_FOR_DUMP_SECS = 120
# The JVM's own warnings to stderr (which the CLI sends to spark.log) instead of stdout, without the archive's: one
# line per class it cannot archive (signed jars) when writing one, and an archive that does not match is not news.
_LOG = "-Xlog:disable -Xlog:all=warning:stderr -Xlog:cds*=off:stderr"


def archive_option(jars: str) -> tuple[str, Path | None]:
    """The driver's JVM option: map the archive, or write one at exit (then the path to rename it to, for
    `settle_at_exit`). Empty when archives are off or no place for them can be written."""
    where = os.environ.get(ARCHIVE_DIR_ENV) or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                                                   / "cdc_assets")
    if where == "off":
        return "", None
    path = Path(where) / f"spark-{_key(jars)}.jsa"
    if path.is_file():
        return f"{_LOG} -XX:SharedArchiveFile={path}", None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return "", None
    return f"{_LOG} -XX:ArchiveClassesAtExit={_partial(path)}", path


def settle_at_exit(gateway, path: Path) -> None:
    """At this process's exit: end the JVM (it exits when its stdin closes), wait while it writes the archive, and
    rename a complete one into place."""
    def settle() -> None:
        proc = getattr(gateway, "proc", None)
        partial = _partial(path)
        try:
            if proc is not None:
                proc.stdin.close()
                if proc.wait(timeout=_WAIT_FOR_DUMP_SECS) == 0 and partial.is_file() and not path.exists():
                    os.replace(partial, path)
        except Exception:  # best effort: without an archive the next driver starts as before, and writes one
            pass
        partial.unlink(missing_ok=True)

    atexit.register(settle)


def _partial(path: Path) -> Path:
    return path.with_name(f"{path.name}.{os.getpid()}.partial")


def _key(jars: str) -> str:
    """What the archive depends on: the JDK, pyspark's jars, ours."""
    import pyspark

    home = os.environ.get("JAVA_HOME")
    java = os.path.realpath(os.path.join(home, "bin", "java") if home else shutil.which("java") or "java")
    built = str(os.stat(java).st_mtime_ns) if os.path.exists(java) else ""  # a JDK upgraded in place
    parts = [java, built, pyspark.__version__, os.path.dirname(pyspark.__file__), jars]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
