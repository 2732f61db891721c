"""Config validation: exact messages naming the key, `${VAR}` expansion, no password in any error."""
import pytest

from cdc_assets.config import LogResumer, SqliteResumer, TargetResumer, load_config, parse_config
from cdc_assets.errors import ConfigError

BASE = {
    "task_id": "shop_sync",
    "source": {"db_type": "mysql", "url": "mysql://cdc:${CDC_TEST_PW}@127.0.0.1:3306", "tables": ["shop.orders"]},
    "target": {"db_type": "postgres", "url": "postgresql://app@127.0.0.1:5432/warehouse"},
}


def cfg(**over):
    raw = {**BASE, **over}
    return raw


def test_minimal_config_gets_defaults_and_expands_env(monkeypatch, tmp_path):
    monkeypatch.setenv("CDC_TEST_PW", "hunter2")
    c = parse_config(cfg(), tmp_path)
    assert c.source.db_url.password == "hunter2"
    assert isinstance(c.resumer, SqliteResumer)
    assert c.snapshot.split_size == 100_000 and c.snapshot.partitions_per_run == 16
    assert c.data_dir == (tmp_path / ".cdc").resolve() and c.log_dir == c.data_dir / "logs"
    assert c.spark.master == "local[*]"


def test_missing_env_var_names_it(monkeypatch, tmp_path):
    monkeypatch.delenv("CDC_TEST_PW", raising=False)
    with pytest.raises(ConfigError, match=r"source.url refers to \$\{CDC_TEST_PW\}"):
        parse_config(cfg(), tmp_path)


@pytest.mark.parametrize("change, expected", [
    ({"snapshot": {"split_size": 0}}, "snapshot.split_size"),
    ({"snapshot": {"split_sise": 5}}, "snapshot.split_sise: unknown key"),
    ({"bogus": 1}, "bogus: unknown key"),
    ({"resumer": {"resume_type": "from_nowhere"}}, "resumer"),
    ({"task_id": "bad id"}, "task_id"),
    ({"spark": {"conf": {"spark.jars.packages": "x"}}}, "spark.jars.packages"),
    ({"spark": {"conf": {"spark.remote": "http://127.0.0.1:15002"}}}, "sc://host:port"),
    ({"spark": {"conf": {"spark.api.mode": "connect"}}}, "needs spark.remote"),
])
def test_bad_values_are_refused_with_the_key(monkeypatch, tmp_path, change, expected):
    monkeypatch.setenv("CDC_TEST_PW", "hunter2")
    with pytest.raises(ConfigError) as err:
        parse_config(cfg(**change), tmp_path)
    assert expected in str(err.value)
    assert "hunter2" not in str(err.value)


def test_spark_remote_is_accepted(monkeypatch, tmp_path):
    monkeypatch.setenv("CDC_TEST_PW", "x")
    conf = {"spark.remote": "sc://127.0.0.1:15002", "spark.api.mode": "connect"}
    assert parse_config(cfg(spark={"conf": conf}), tmp_path).spark.conf["spark.remote"] == "sc://127.0.0.1:15002"


def test_wrong_url_scheme_for_db_type_is_masked(monkeypatch, tmp_path):
    monkeypatch.setenv("CDC_TEST_PW", "hunter2")
    raw = cfg(target={"db_type": "mysql", "url": "postgresql://app:topsecret@h/db"})
    with pytest.raises(ConfigError) as err:
        parse_config(raw, tmp_path)
    assert "target" in str(err.value) and "topsecret" not in str(err.value)


def test_unqualified_table_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("CDC_TEST_PW", "x")
    raw = cfg(source={**BASE["source"], "tables": ["orders"]})
    with pytest.raises(ConfigError, match="database.table"):
        parse_config(raw, tmp_path)


def test_resumer_variants_parse(monkeypatch, tmp_path):
    monkeypatch.setenv("CDC_TEST_PW", "x")
    assert isinstance(parse_config(cfg(resumer={"resume_type": "from_target"}), tmp_path).resumer, TargetResumer)
    r = parse_config(cfg(resumer={"resume_type": "from_log", "log_dir": "logs2"}), tmp_path).resumer
    assert isinstance(r, LogResumer) and r.log_dir == (tmp_path / "logs2").resolve()


def test_config_file_from_env_var(monkeypatch, tmp_path):
    import yaml

    monkeypatch.setenv("CDC_TEST_PW", "x")
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(BASE))
    monkeypatch.setenv("CDC_ASSETS_CONFIG", str(path))
    assert load_config().task_id == "shop_sync"
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def _targets(*targets, **pipeline) -> dict:
    raw = cfg(targets=list(targets), pipeline=pipeline)
    del raw["target"]
    return raw


PG_A = {"name": "a", "db_type": "postgres", "url": "postgresql://u:secret@h:5432/a"}
PG_B = {"name": "b", "db_type": "postgres", "url": "postgresql://u:secret@h:5432/b", "required": False}


def test_target_is_a_list_of_one_and_targets_a_list(monkeypatch, tmp_path):
    monkeypatch.setenv("CDC_TEST_PW", "hunter2")
    one = parse_config(cfg(), tmp_path)
    assert [t.name for t in one.targets] == ["target"] and one.target is one.targets[0]
    several = parse_config(_targets(PG_A, PG_B, commit_policy="required"), tmp_path)
    assert [(t.name, t.required) for t in several.targets] == [("a", True), ("b", False)]
    assert several.pipeline.commit_policy == "required"


@pytest.mark.parametrize("raw, expected", [
    (lambda: {**cfg(), "targets": [PG_A]}, "either target"),
    (lambda: _targets(PG_A, {**PG_B, "name": "a"}), "a name of its own"),
    (lambda: _targets(PG_A, {**PG_B, "url": PG_A["url"]}), "same url"),
    (lambda: _targets(PG_A, PG_B, commit_policy="quorum(3)"), "only 2 targets"),
    (lambda: _targets({**PG_A, "required": False}, PG_B, commit_policy="required"), "no target is required"),
    (lambda: _targets(PG_A, PG_B, commit_policy="most"), "commit_policy"),
])
def test_bad_targets_are_refused(monkeypatch, tmp_path, raw, expected):
    monkeypatch.setenv("CDC_TEST_PW", "hunter2")
    with pytest.raises(ConfigError) as err:
        parse_config(raw(), tmp_path)
    assert expected in str(err.value) and "secret" not in str(err.value)
