"""The layout holds: one home per method, shared code below the methods, small modules, no import circle.

Read statically from the source (every import, function-level ones included), so a violation fails
here with the file and the import, not as a surprise when some path first runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"app": "recollect", "graphs": "recollect.graphs"}
METHOD_FOLDERS = ("memr3", "mragent", "hymem", "mgretrieval", "baselines")
# The entry points reach methods through the registry; nothing else in app/ may import recollect.graphs.
ENTRY_POINTS = ("recollect", "recollect.api", "recollect.cli", "recollect.cli_args", "recollect.runner",
                "recollect.ingestion", "recollect.recall", "recollect.agent_memory", "recollect.eval", "recollect.service")
MAX_LINES = 400
CONTRACT = "recollect.graphs.spec"


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            out[".".join([package, *parts])] = path
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("recollect"):
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("recollect"))
    return {m for m in found if m in modules}


def _is_under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_no_module_is_over_400_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _modules().values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_no_import_circle() -> None:
    modules = _modules()
    graph = {m: _imports(p, modules) - {m} for m, p in modules.items()}
    # a package's __init__ importing its own children is not a circle of concern; every other edge counts
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == []


def test_shared_code_never_imports_a_method() -> None:
    modules = _modules()
    bad = []
    for module, path in modules.items():
        if _is_under(module, "recollect.graphs") or any(
                module == e or (e != "recollect" and _is_under(module, e)) for e in ENTRY_POINTS):
            continue
        bad += [(module, m) for m in _imports(path, modules) if _is_under(m, "recollect.graphs")]
    assert bad == []


def test_entry_points_reach_methods_only_through_the_registry() -> None:
    modules = _modules()
    allowed = {"recollect.graphs.registry", "recollect.graphs.ingest"}
    bad = []
    for module, path in modules.items():
        if _is_under(module, "recollect.graphs"):
            continue
        bad += [(module, m) for m in _imports(path, modules) if _is_under(m, "recollect.graphs") and m not in allowed]
    assert bad == []


def test_a_method_imports_no_other_method_and_no_entry_point() -> None:
    modules = _modules()
    bad = []
    for method in METHOD_FOLDERS:
        home = f"recollect.graphs.{method}"
        for module, path in modules.items():
            if not _is_under(module, home):
                continue
            for m in _imports(path, modules):
                # the methods' contract (recollect.graphs.spec) is shared, not a method
                other_method = _is_under(m, "recollect.graphs") and not _is_under(m, home) and m != CONTRACT
                entry = m != "recollect" and any(_is_under(m, e) for e in ENTRY_POINTS if e != "recollect")
                if other_method or entry:
                    bad.append((module, m))
    assert bad == []


def test_code_cites_only_files_in_the_repository() -> None:
    cited = [str(p.relative_to(ROOT)) for folder in ("app", "graphs", "tests", "benchmarks")
             for p in (ROOT / folder).rglob("*.py") if "specs/" in p.read_text(encoding="utf-8")
             and p.name != "test_layout.py"]
    assert cited == []


def test_every_method_folder_has_a_readme() -> None:
    for method in METHOD_FOLDERS:
        readme = ROOT / "graphs" / method / "README.md"
        assert readme.is_file() and len(readme.read_text(encoding="utf-8")) > 500, method
