"""The layering rules of pyproject.toml hold (only defs/ imports dagster, dependencies point one way), no module
imports itself back through others, and the engine asks sources and sinks only what their protocols declare."""
import ast
import re
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


# Capabilities are declared, never probed: what a source or sink can do (a pipe, a JDBC endpoint, savepoints) is a
# member of its protocol in core/boundary.py, so the engine, the Dagster shell, Spark and the savepoint storage ask
# the protocol, never which class a source or sink is, whether it has an attribute, or which engine it is.
PROBE_FREE = ("cdc_assets/engine", "cdc_assets/defs", "cdc_assets/spark", "cdc_assets/sinks/before_images.py")
PROTOCOLS = {"SnapshotSource", "Log", "LogReader", "Sink", "SplitLeases"}
HOLDER = re.compile(r"(^|_)(source|sink|log|reader)s?$")  # what names a source, sink, log or log reader


def capability_probes(source: str, filename: str) -> list[str]:
    """Where `source` asks a source, sink or log what it is instead of what it declares: isinstance/issubclass
    against a source or sink class (or a protocol), getattr/hasattr on a source, sink, log or reader, and a
    comparison of a `db_type` or `dialect`. An isinstance on a value (a str, a Transaction, an export) is no probe."""
    tree = ast.parse(source, filename)
    classes = set(PROTOCOLS)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("cdc_assets.sources", "cdc_assets.sinks")):
            classes.update(a.asname or a.name for a in node.names)

    def name_of(node) -> str:
        return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""

    def is_class(node) -> bool:
        if isinstance(node, ast.Tuple):
            return any(is_class(e) for e in node.elts)
        name = name_of(node)
        return name in classes or name.endswith(("Source", "Sink"))

    def compares_engine(node: ast.Compare) -> bool:
        """`x.db_type == ...`, `dialect != ...`, `db_type in ("mysql", ...)`; not the registry's lookup of a db_type
        in its table (`db_type not in SINKS`)."""
        operands = [node.left, *node.comparators]
        for op, a, b in zip(node.ops, operands, operands[1:]):
            for named, other in ((a, b), (b, a)):
                if name_of(named).endswith(("db_type", "dialect")) and (
                        not isinstance(op, (ast.In, ast.NotIn)) or isinstance(other, (ast.Tuple, ast.List, ast.Set))):
                    return True
        return False

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2:
            call, first, second = node.func.id, node.args[0], node.args[1]
            if (call in ("isinstance", "issubclass") and is_class(second)
                    or call in ("getattr", "hasattr") and HOLDER.search(name_of(first).lower())):
                found.append(node)
        elif isinstance(node, ast.Compare) and compares_engine(node):
            found.append(node)
    return [f"{filename}:{n.lineno}: {ast.unparse(n)}" for n in sorted(found, key=lambda n: (n.lineno, n.col_offset))]


def probe_free_files() -> list[Path]:
    return sorted(p for d in PROBE_FREE for p in ([ROOT / d] if d.endswith(".py") else (ROOT / d).rglob("*.py")))


def test_capabilities_are_declared_not_probed():
    found = [hit for path in probe_free_files()
             for hit in capability_probes(path.read_text(), str(path.relative_to(ROOT)))]
    assert not found, "ask what core/boundary.py's protocols declare, not what a source or sink is:\n" + "\n".join(found)


def test_capability_probes_are_found():
    """The check above finds the probes these modules held before their sources and sinks declared them, and lets
    an isinstance on a value, or a getattr on something that is no source or sink, pass."""
    before = '''
from cdc_assets.sinks.base import SqlSink
class BeforeImages:
    def __init__(self, sink):
        self.supported = isinstance(sink, SqlSink)
        self.mysql = sink.db_type == "mysql"
def snapshot_reads_jdbc(self):
    return getattr(self.source, "pipes_copy", None)
def warm_up_source(session, source, rt, source_db_type):
    return getattr(source, "jdbc", None), hasattr(rt.log, "savepoints"), isinstance(rt.sink, (Sink, int))
def _kind(source_db_type, url):
    return "binary" if source_db_type != "postgres" or url.db_type in ("mysql", "mariadb") else None
'''
    found = capability_probes(before, "before.py")
    assert [h.split(": ", 1)[1].split("(")[0].split(" ")[0] for h in found] == [
        "isinstance", "sink.db_type", "getattr", "getattr", "hasattr", "isinstance", "source_db_type", "url.db_type"], found
    after = '''
from cdc_assets.core.events import Transaction
if isinstance(value, str) or isinstance(item, Transaction) or isinstance(r, SqliteResumer):
    position = getattr(item, "position", None), getattr(session, "_sc", None)
    same = plan.key_kind == "int" and rt.sink.supports_savepoints and rt.source.pipes_copy(target)
    known = db_type not in SINKS  # the registry's lookup
'''
    assert capability_probes(after, "after.py") == []


# No two modules of cdc_assets import each other, directly or through others, not even inside a function: a module
# that needs another's name imports it from the module that owns the concept.
def module_imports(sources: dict[str, str]) -> dict[str, set[str]]:
    """{module: its source} -> {module: the modules of `sources` it imports, at module level or in a function}."""
    graph: dict[str, set[str]] = {}
    for module, text in sources.items():
        imported = set()
        for node in ast.walk(ast.parse(text, module)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            for name in names:
                while name and name not in sources:  # `from m import f`: m, the nearest module that exists
                    name = name.rpartition(".")[0]
                if name and name != module:
                    imported.add(name)
        graph[module] = imported
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that reach each other through imports (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def package_sources() -> dict[str, str]:
    sources = {}
    for path in sorted((ROOT / "cdc_assets").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        sources[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text()
    return sources


def test_no_import_cycles():
    cycles = import_cycles(module_imports(package_sources()))
    assert not cycles, "modules that import each other (move what they share to the module that owns it):\n" + \
        "\n".join(" <-> ".join(c) for c in cycles)


def test_import_cycles_are_found():
    """A cycle closed by an import inside a function counts, as the one between spark/pacing.py, spark/session.py
    and spark/staging.py did; a module importing its own names, or a one-way chain, is none."""
    sources = {
        "cdc_assets.spark.pacing": "from cdc_assets.spark.session import is_shared\n",
        "cdc_assets.spark.session": "def warm_up():\n    from cdc_assets.spark.staging import per_task\n",
        "cdc_assets.spark.staging": "import cdc_assets.spark.pacing\nfrom cdc_assets.core import tables\n",
        "cdc_assets.core": "",
        "cdc_assets.core.tables": "from cdc_assets.core.tables import TableId\n",
    }
    assert import_cycles(module_imports(sources)) == [
        ["cdc_assets.spark.pacing", "cdc_assets.spark.session", "cdc_assets.spark.staging"]]
    del sources["cdc_assets.spark.session"]
    assert import_cycles(module_imports(sources)) == []


MAX_FILE_LINES, MAX_CLASS_LINES, MAX_SYNC_LINES = 400, 150, 300


def oversized(sources: dict[str, str]) -> list[str]:
    """Modules over MAX_FILE_LINES lines and classes over MAX_CLASS_LINES (docstring included): a part a
    reader cannot hold in their head; the sync's own module stays under MAX_SYNC_LINES."""
    found = []
    for module, text in sources.items():
        lines = len(text.splitlines())
        limit = MAX_SYNC_LINES if module == "cdc_assets.engine.incremental" else MAX_FILE_LINES
        if lines > limit:
            found.append(f"{module}: {lines} lines (at most {limit})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                found.append(f"{module}.{node.name}: {node.end_lineno - node.lineno + 1} lines "
                             f"(at most {MAX_CLASS_LINES})")
    return found


def test_no_module_or_class_is_too_big():
    too_big = oversized(package_sources())
    assert not too_big, "split these into parts that own one thing each:\n" + "\n".join(too_big)


def test_oversized_parts_are_found():
    big_class = "class Big:\n" + "    x = 1\n" * MAX_CLASS_LINES
    assert oversized({"cdc_assets.a": big_class, "cdc_assets.b": "x = 1\n" * (MAX_FILE_LINES + 1),
                      "cdc_assets.engine.incremental": "x = 1\n" * MAX_SYNC_LINES,
                      "cdc_assets.c": "class Small:\n" + "    x = 1\n" * (MAX_CLASS_LINES - 1)}) == [
        f"cdc_assets.a.Big: {MAX_CLASS_LINES + 1} lines (at most {MAX_CLASS_LINES})",
        f"cdc_assets.b: {MAX_FILE_LINES + 1} lines (at most {MAX_FILE_LINES})"]
