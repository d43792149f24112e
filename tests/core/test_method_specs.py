"""One typed contract per method (recollect.graphs.spec): every method folder has one, the registry lists
exactly those, and every reference in them resolves to what it claims to be."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from recollect.graphs.registry import BUILDERS, METHODS, SPECS, AllMethodsContext, spec, step_limit
from recollect.graphs.spec import MemorySpec, MethodSpec, Ref
from recollect.settings import Context
from tests.core.test_layout import METHOD_FOLDERS, ROOT


def test_every_method_folder_has_a_spec_and_the_registry_lists_exactly_them() -> None:
    found: list[MethodSpec] = []
    for folder in METHOD_FOLDERS:
        assert (ROOT / "graphs" / folder / "spec.py").is_file(), folder
        module = importlib.import_module(f"recollect.graphs.{folder}.spec")
        found += [v for v in vars(module).values() if isinstance(v, MethodSpec)]
    assert sorted(s.name for s in found) == sorted(s.name for s in SPECS) == sorted(METHODS)
    assert len(set(METHODS)) == len(SPECS)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_each_reference_resolves_to_what_the_spec_says(name: str) -> None:
    s = spec(name)
    graph = s.graph.load()
    assert graph.name == name and graph.builder.context_schema is s.context
    assert issubclass(s.context, Context)
    assert step_limit(name, AllMethodsContext()) >= 1
    if s.memory is not None:
        assert BUILDERS[s.memory.name] is s.memory
        assert callable(s.memory.build.load()) and callable(s.memory.reach.load())
    if s.eval_fields is not None:
        assert callable(s.eval_fields.load())
    assert s.aux_llm_nodes <= set(graph.nodes)


def test_a_spec_names_code_without_importing_it() -> None:
    # naming methods (the CLI's --help, settings, the server's config) must not pull in every graph
    code = ("import sys, recollect.graphs.registry as r; r.available_methods(); r.context_class('mragent'); "
            "print([m for m in sys.modules if m.endswith(('.graph', '.memory')) and m.startswith('recollect.graphs')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_a_reference_says_what_is_wrong_with_it() -> None:
    with pytest.raises(ValueError, match="module:attribute"):
        Ref("recollect.graphs.memr3.graph")
    missing: Ref[object] = Ref("recollect_no_such_package.mod:thing")
    assert not missing.available()
    assert Ref("recollect.memory.chunks:turn_ids_in_memory").available()
    assert isinstance(spec("rag").memory, MemorySpec) and spec("full_context").memory is None
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        spec("nope")
    assert Path(importlib.import_module("recollect.graphs.spec").__file__ or "").name == "spec.py"


def test_the_server_config_serves_each_method_at_its_specs_graph() -> None:
    import json

    served = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))["graphs"]
    assert {name: served[name]["path"] for name in METHODS} == {name: s.graph.target for name, s in METHODS.items()}
