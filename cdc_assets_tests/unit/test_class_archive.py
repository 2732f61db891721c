"""The driver JVM's class archive: written by the first driver, then mapped; never half-written in place."""
import os

from cdc_assets.spark import class_archive
from cdc_assets.spark.class_archive import ARCHIVE_DIR_ENV, archive_option


def test_the_first_driver_writes_a_partial_archive_and_later_ones_map_the_settled_one(tmp_path, monkeypatch):
    monkeypatch.setenv(ARCHIVE_DIR_ENV, str(tmp_path))
    option, settle_to = archive_option("/a.jar,/b.jar")
    assert f"-XX:ArchiveClassesAtExit={settle_to}.{os.getpid()}.partial" in option
    settle_to.write_bytes(b"archive")  # what settle_at_exit renames into place once the JVM exited cleanly
    option, again = archive_option("/a.jar,/b.jar")
    assert again is None and f"-XX:SharedArchiveFile={settle_to}" in option
    other, path = archive_option("/a.jar")  # other jars: another archive
    assert path is not None and path != settle_to and "ArchiveClassesAtExit" in other


def test_archives_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(ARCHIVE_DIR_ENV, "off")
    assert archive_option("/a.jar") == ("", None)


def test_settle_renames_only_after_a_clean_exit(tmp_path, monkeypatch):
    hooks = []
    monkeypatch.setattr(class_archive.atexit, "register", hooks.append)
    path = tmp_path / "spark-x.jsa"

    class Proc:
        def __init__(self, code):
            self.code, self.stdin = code, open(os.devnull, "w")

        def wait(self, timeout):
            return self.code

    for code, settled in [(1, False), (0, True)]:
        class_archive._partial(path).write_bytes(b"dumped")
        class_archive.settle_at_exit(type("Gateway", (), {"proc": Proc(code)})(), path)
        hooks.pop()()
        assert path.exists() is settled and not class_archive._partial(path).exists()
