"""The documentation: the site builds without a warning, the generated reference pages match the code, every path a
comment or a page names exists, no text narrates the project's history, and the README's commands are what CI
runs."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tracked() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / n for n in names if (ROOT / n).is_file()]


def test_mkdocs_build_is_strict_clean(tmp_path):
    """`mkdocs build --strict` fails on a broken link or anchor, a page left out of the nav, a missing image."""
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1",
                                                                           **_environ()})
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "reference" / "config" / "index.html").exists()


def _environ() -> dict:
    import os

    return dict(os.environ)


def test_reference_pages_match_the_code():
    stale = _generator().stale()
    assert not stale, f"stale: {[str(p.relative_to(ROOT)) for p in stale]}; run python scripts/gen_reference.py"


def test_the_generator_sees_a_changed_description(monkeypatch):
    """The staleness check can fail: a description changed in the model changes the page."""
    from cdc_assets.config import SnapshotConfig

    gen = _generator()
    before = gen.config_page()
    field = SnapshotConfig.model_fields["split_size"]
    monkeypatch.setattr(field, "description", "rows per split, said otherwise")
    assert gen.config_page() != before
    assert "rows per split, said otherwise" in gen.config_page()


def test_every_config_key_has_a_description():
    from pydantic import BaseModel

    from cdc_assets.config import TaskConfig

    gen = _generator()
    missing = [f"{model.__name__}.{key}" for model in gen._models(TaskConfig) if issubclass(model, BaseModel)
               for key, field in model.model_fields.items() if not (field.description or "").strip()]
    assert not missing, f"add a docstring under each of these fields in cdc_assets/config.py: {missing}"


def test_every_error_class_says_what_it_means():
    """Each CdcError child has a docstring of its own (the errors page shows it), not its parent's."""
    gen = _generator()
    classes = gen._error_classes()
    assert len(classes) >= 20
    bare = [c.__name__ for c in classes if "__doc__" not in vars(c) or not (c.__doc__ or "").strip()]
    assert not bare, f"give these error classes a docstring (meaning and way out): {bare}"


def test_cli_page_lists_every_command():
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for command in ("plan", "snapshot", "sync", "reset", "verify", "savepoint", "positions", "demo", "ui",
                    "spark-connect-server", "savepoint rollback"):
        assert f"## `{command}`" in page or f"### `{command}`" in page, command


# ---- paths named in comments and docs -----------------------------------------------------------------------------

# A path-like word: folders and a file name with an extension we keep (`engine/lanes.py`, `sinks/base.py`).
_PATH = re.compile(r"(?<![\w./$<{-])((?:[\w-]+/)+[\w.-]+\.(?:py|md|yaml|yml|toml|sql|js|properties|sh|png))\b")
# A bare module name (`task_lock.py`): some file of that name must exist. Quoted names are data (a test's file
# name), not references.
_MODULE = re.compile(r"""(?<![\w./$<{"'-])([a-z_][a-z0-9_]*\.py)\b""")
# Paths in other projects' trees, quoted where our code cites them.
_ELSEWHERE = ("src/mongo/", "pymysqlreplication/", "sbin/", "sql/", "libbinlogevents/", "examples/",
              "sources/pg_replication/", "dt-common/", "flink-cdc-base/")
_ELSEWHERE_MODULES = {"row_event.py", "setup.py", "conftest.py", "binlogstream.py", "packet.py", "event.py",
                      "column.py", "constants.py", "connections.py", "cursors.py", "helpers.py",
                      "id_range_for_time.py", "position.rs"}


def _checked_files() -> list[Path]:
    keep = (".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".sql", ".js", ".properties")
    return [p for p in _tracked() if (p.suffix in keep or p.name == "run") and p != Path(__file__).resolve()]


def _candidates(path: str) -> list[Path]:
    return [ROOT / path, ROOT / "cdc_assets" / path, ROOT / "cdc_assets_tests" / path, ROOT / "docs" / path]


def test_paths_named_in_comments_and_docs_exist():
    names = {p.name for p in _tracked()}
    missing = []
    for file in _checked_files():
        text = file.read_text(errors="replace")
        for match in _PATH.finditer(text):
            path = match.group(1)
            if path.startswith(_ELSEWHERE) or any(c.exists() for c in _candidates(path)):
                continue
            if file.suffix == ".md" and (file.parent / path).exists():
                continue  # a relative link between pages
            missing.append(f"{file.relative_to(ROOT)}: {path}")
        for match in _MODULE.finditer(text):
            name = match.group(1)
            if name not in names and name not in _ELSEWHERE_MODULES:
                missing.append(f"{file.relative_to(ROOT)}: {name}")
    assert not missing, "paths named but not in the tree:\n" + "\n".join(sorted(set(missing)))


def test_the_path_check_finds_a_stale_path(tmp_path):
    """The check can fail: the stale name it was written for is caught."""
    assert _PATH.search("# see engine/lanes.py") and not any(c.exists() for c in _candidates("engine/lanes.py"))


# ---- no diary -----------------------------------------------------------------------------------------------------

_DIARY = re.compile(r"\bissue \d+|\bissue's\b|\bthis session\b|\bprevious session\b|\bmain at [0-9a-f]{7}|"
                    r"\bthis branch\b|\bmerged main\b|\bother helpers\b|\((?:old|before|after): ?[0-9a-f]{7}\)|"
                    r"\bbefore \([0-9a-f]{7}\)", re.IGNORECASE)


def test_no_text_narrates_the_projects_history():
    """Docs, comments and docstrings are written for a reader: no issue numbers, sessions or commits as a story."""
    found = []
    for file in _checked_files():
        for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
            if _DIARY.search(line):
                found.append(f"{file.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("line", ["the issue's 10-split backfill", "Snapshot (issue 11)", "main at b026213",
                                  "this session's figures"])
def test_the_diary_check_can_fail(line):
    assert _DIARY.search(line)


# ---- the README's commands ----------------------------------------------------------------------------------------

def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/install-deps.sh && python -m cdc_assets.cli demo --dir .cdc-demo" in readme
    [command] = re.findall(r"^(python -m pytest[^\n]*)$", readme, re.MULTILINE)
    assert re.search(rf"^{re.escape(command)}( \|\||$)", ci, re.MULTILINE), "CI must run the README's test command"
    assert "bash scripts/install-deps.sh" in ci


def test_the_readme_stays_a_front_door():
    assert len((ROOT / "README.md").read_bytes()) < 12_000


def test_install_deps_installs_mkdocs():
    """mkdocs and its theme come with the dev extra that scripts/install-deps.sh installs."""
    import tomllib

    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    assert any(d.startswith("mkdocs>") or d == "mkdocs" for d in dev)
    assert any(d.startswith("mkdocs-material") for d in dev)
    assert '-e ".[dev]"' in (ROOT / "scripts" / "install-deps.sh").read_text()
