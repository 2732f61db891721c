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


# The engine speaks only the protocols of core/boundary.py: which engine a source or sink is never decides
# anything in it, and the SQL a source reads with is the source's own.
ENGINE_DIRS = ("cdc_assets/engine", "cdc_assets/defs")
DB_TYPES = {"mysql", "mariadb", "postgres", "postgresql", "mongodb"}
SQL_SOURCE_METHODS = {"jdbc", "select_expr", "copy_line", "quote", "table_sql"}


def engine_decisions(source: str, filename: str) -> list[str]:
    """Where `source` compares a db_type/dialect, or a database's name, or calls a SQL source's own methods."""
    import ast

    found = []

    def names_engine(node) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value.lower() in DB_TYPES
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(names_engine(e) for e in node.elts)
        return isinstance(node, ast.Attribute) and node.attr in ("dialect", "db_type")

    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Compare) and any(names_engine(n) for n in [node.left, *node.comparators]):
            found.append(f"{filename}:{node.lineno}: compares {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_SOURCE_METHODS:
            found.append(f"{filename}:{node.lineno}: calls {ast.unparse(node.func)}(")
        elif isinstance(node, ast.match_case) and names_engine(getattr(node.pattern, "value", None)):
            found.append(f"{filename}:{node.lineno}: matches a database's name")
    return found


def test_engine_decides_nothing_by_database():
    found = [hit for d in ENGINE_DIRS for path in sorted((ROOT / d).rglob("*.py"))
             for hit in engine_decisions(path.read_text(), str(path.relative_to(ROOT)))]
    assert not found, "the engine must speak only core/boundary.py's protocols:\n" + "\n".join(found)


def test_engine_decisions_are_found():
    """The check above finds what the engine did before the boundary (engine/snapshot.py, engine/runtime.py)."""
    before = '''
def _copy_lines(rt):
    return rt.sink.dialect == "postgres"
def _nul_in_text(rt, exc):
    if rt.source.dialect != "mysql" or "0x00" not in str(exc):
        return None
def _read(rt, source, c):
    warm_up(rt.spark, rt.source.jdbc())
    return source.select_expr(c, rt.sink.dialect), source.quote(c.name), source.table_sql(c), source.copy_line([], "", str)
def _kind(url):
    return "binary" if url.db_type in ("mysql", "mariadb") else None
'''
    found = engine_decisions(before, "before.py")
    assert [h.split(": ", 1)[1].split(" ")[0] for h in found].count("compares") == 3, found
    assert sorted(h.rsplit(".", 1)[1] for h in found if ": calls " in h) == sorted(
        ["jdbc(", "select_expr(", "quote(", "table_sql(", "copy_line("]), found
    assert engine_decisions("x = rt.sink.target_format()\nif plan.key_kind == 'int': pass\n", "after.py") == []
