"""The local workers' daemon puts SPARK_HOME's zips behind PySpark's installed copy, and only when that copy is
SPARK_HOME itself (a pip-installed PySpark); any other layout keeps the JVM's path."""
from pathlib import Path

from cdc_assets.spark.worker_daemon import installed_first


def _package(where: Path) -> Path:
    (where / "pyspark").mkdir(parents=True)
    (where / "pyspark" / "__init__.py").write_text("")
    return where / "pyspark"


def _zips(home: Path) -> list[str]:
    lib = home / "python" / "lib"
    lib.mkdir(parents=True)
    return [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]


def test_a_pip_installed_pyspark_is_imported_from_its_installed_copy(tmp_path):
    site = tmp_path / "site-packages"
    home = _package(site)
    zips = _zips(home)
    jar = str(home / "jars" / "spark-core.jar")
    path = ["", *zips, jar, str(tmp_path / "stdlib"), str(site)]
    assert installed_first(path, str(home), str(tmp_path / "cwd")) == ["", jar, str(tmp_path / "stdlib"), str(site),
                                                                       *zips]


def test_a_spark_distribution_keeps_the_jvms_path(tmp_path):
    site = tmp_path / "site-packages"
    _package(site)  # some other PySpark installed beside the distribution: not what SPARK_HOME runs
    home = tmp_path / "spark-4.3.0-bin"
    path = [*_zips(home), str(site)]
    assert installed_first(path, str(home), str(tmp_path)) == path


def test_no_installed_copy_or_no_spark_home_keeps_the_path(tmp_path):
    home = tmp_path / "site-packages" / "pyspark"
    path = [*_zips(home), str(tmp_path / "elsewhere")]
    assert installed_first(path, str(home), str(tmp_path)) == path
    assert installed_first(path, "", str(tmp_path)) == path


def test_the_working_directory_counts_for_an_empty_entry(tmp_path):
    home = _package(tmp_path / "cwd")
    zips = _zips(home)
    assert installed_first([*zips, ""], str(home), str(tmp_path / "cwd")) == ["", *zips]
    assert installed_first([*zips, ""], str(home), str(tmp_path)) == [*zips, ""]  # no PySpark there


def test_only_local_sessions_use_it_and_others_say_so():
    """Every session names its daemon: one started after a local session in the same JVM inherits that session's
    settings, and a cluster's executors would then start ours, shadowing the package zip shipped to them."""
    from cdc_assets.config import SparkConfig
    from cdc_assets.spark.session import spark_settings

    daemon = "spark.python.daemon.module"
    assert spark_settings(SparkConfig(master="local[2]"))[daemon] == "cdc_assets.spark.worker_daemon"
    assert spark_settings(SparkConfig(master="spark://10.0.0.1:7077"))[daemon] == "pyspark.daemon"
    assert spark_settings(SparkConfig(master="local[2]", conf={daemon: "mine"}))[daemon] == "mine"
