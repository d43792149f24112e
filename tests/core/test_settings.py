"""Runtime settings Studio can show and the server can trust: every field described, every value
type- and range-checked with one error naming the setting (CLI exit 2, never a traceback); each graph's
panel holds the shared settings and its own method's; `profile=paper` gives each paper's values."""

from __future__ import annotations

import socket
from dataclasses import fields

import pytest

from recollect.cli import main
from recollect.graphs.baselines.graph import rag
from recollect.graphs.hymem.settings import HyMemContext
from recollect.graphs.memr3.settings import MemR3Context
from recollect.graphs.registry import METHODS, AllMethodsContext, context_class, load_graph, method_context
from recollect.settings import PYTHON_ONLY, SERVER_ONLY, Context, ContextError, paper_values

PREFIXES = {"memr3": "memr3_", "mragent": "mra_", "hymem": "hymem_", "mgretrieval": "mg_"}
# Set from Python or by the server's configuration, never by a client: left out of the schema Studio shows.
HIDDEN = PYTHON_ONLY | SERVER_ONLY


def test_every_setting_has_a_description_in_the_studio_schema() -> None:
    for name in METHODS:
        props = load_graph(name).get_context_jsonschema()["properties"]
        missing = [f.name for f in fields(context_class(name))
                   if f.name not in HIDDEN and not props.get(f.name, {}).get("description")]
        assert missing == [], name
        assert not HIDDEN & set(props), name


def test_each_graph_lists_the_shared_settings_and_only_its_own_methods() -> None:
    shared = {f.name for f in fields(Context)} - HIDDEN
    for name in METHODS:
        props = set(load_graph(name).get_context_jsonschema()["properties"])
        assert shared <= props, name
        others = [p for m, p in PREFIXES.items() if m != name and not (name == "rag" and m == "memr3")]
        foreign = sorted(k for k in props if any(k.startswith(p) for p in others) and k not in
                         {"memr3_chunk_tokens", "memr3_candidate_k", "memr3_rerank"})
        assert foreign == [], (name, foreign)
    memr3 = set(load_graph("memr3").get_context_jsonschema()["properties"])
    assert "memr3_max_iterations" in memr3 and not any(k.startswith(("mra_", "hymem_", "mg_")) for k in memr3)


def test_counts_and_sizes_have_ranges() -> None:
    props = AllMethodsContext.__dataclass_fields__
    for name in ("memr3_max_iterations", "memr3_top_k", "rag_top_k", "mra_max_rounds", "hymem_light_k",
                 "mg_max_rounds", "max_prompt_tokens"):
        assert props[name].metadata.get("ge", -1) >= 1, name
    assert rag.get_context_jsonschema()["properties"]["rag_top_k"]["minimum"] == 1
    jaccard = load_graph("mragent").get_context_jsonschema()["properties"]["mra_jaccard"]
    assert jaccard["minimum"] == 0 and jaccard["maximum"] == 1


@pytest.mark.parametrize(("overrides", "message"), [
    ({"memr3_max_iterations": "abc"}, "setting memr3_max_iterations: input should be a valid integer"),
    ({"memr3_max_iterations": -3}, "setting memr3_max_iterations: must be at least 1"),
    ({"memr3_top_k": True}, "setting memr3_top_k: expected a number"),
    ({"mra_jaccard": 1.5}, "setting mra_jaccard: must be at most 1"),
    ({"memr3_rerank": "bogus"}, "setting memr3_rerank: input should be 'none' or 'hybrid'"),
    ({"namespace": " lead"}, "setting namespace: it starts or ends with a space"),
    ({"namespace": "a\nb"}, "setting namespace: it holds the non-printable character"),
    ({"profile": "best"}, "setting profile"),
])
def test_bad_values_name_the_setting(overrides: dict, message: str) -> None:
    with pytest.raises(ContextError, match=message.replace("(", r"\(")):
        AllMethodsContext(**overrides)
    with pytest.raises(ContextError, match="setting"):
        AllMethodsContext().with_overrides(**overrides)


@pytest.mark.parametrize("namespace", ["a@b.com", "auth0|123", "Zoë Ångström", "bad name!", "x" * 200, ""])
def test_the_namespace_setting_takes_every_valid_namespace(namespace: str) -> None:
    """The namespace setting follows the namespace id rule (recollect.namespace_ids), "" meaning none."""
    assert AllMethodsContext(namespace=namespace).namespace == namespace
    assert AllMethodsContext().with_overrides(namespace=namespace).narrow(MemR3Context).namespace == namespace


def test_a_method_context_rejects_another_methods_setting() -> None:
    with pytest.raises(TypeError, match="mra_max_rounds"):
        MemR3Context(mra_max_rounds=3)
    with pytest.raises(ContextError, match="unknown context setting"):
        MemR3Context().with_overrides(hymem_light_k=3)


def test_json_strings_are_converted() -> None:
    ctx = AllMethodsContext(memr3_max_iterations="7", mra_jaccard="0.5")
    assert ctx.memr3_max_iterations == 7 and ctx.mra_jaccard == 0.5


def test_paper_profile_takes_each_papers_values_and_explicit_settings_win() -> None:
    papers = paper_values(AllMethodsContext)
    assert papers["memr3_answer_snippets"] == "never" and papers["hymem_answer_style"] == "full"
    assert papers["answer_absolute_dates"] is False
    tuned, paper = AllMethodsContext(), AllMethodsContext(profile="paper")
    for name, value in papers.items():
        assert getattr(paper, name) == value, name
        assert getattr(tuned, name) != value, name
    mixed = AllMethodsContext(profile="paper", memr3_answer_snippets="always")
    assert mixed.memr3_answer_snippets == "always" and mixed.hymem_answer_style == "full"
    # A profile switched later re-applies to every setting that was not given explicitly.
    switched = AllMethodsContext(hymem_light_k=3).with_overrides(profile="paper")
    assert switched.hymem_light_k == 3 and switched.hymem_answer_style == "full"
    assert switched.with_overrides(profile="tuned").hymem_answer_style == "short"


def test_narrowing_keeps_values_profile_and_python_objects() -> None:
    model = object()
    ctx = AllMethodsContext(profile="paper", hymem_light_k=4, memr3_top_k=9, chat_model=model)
    hymem = method_context("hymem", ctx)
    assert type(hymem) is HyMemContext and not hasattr(hymem, "memr3_top_k")
    assert hymem.hymem_light_k == 4 and hymem.hymem_answer_style == "full" and hymem.chat_model is model
    assert method_context("memr3", ctx).memr3_top_k == 9
    # The Studio / SDK path: a dict of the graph's own settings becomes its context class.
    assert HyMemContext(**{"profile": "paper"}).hymem_light_grounding is False


def test_every_paper_value_is_a_valid_setting() -> None:
    for name in METHODS:
        cls = context_class(name)
        cls(**paper_values(cls))  # type- and range-checked


@pytest.mark.parametrize("value", ["abc", "-3", "0"])
def test_cli_set_bad_value_is_exit_2(capsys: pytest.CaptureFixture[str], data_dir: str, value: str) -> None:
    code = main(["--data-dir", data_dir, "ask", "q?", "-n", "x", "--set", f"memr3_max_iterations={value}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: setting memr3_max_iterations") and "Traceback" not in err


def test_serve_fails_clearly_when_the_port_is_taken(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    assert f"port {port} is already in use" in capsys.readouterr().err


def test_settings_command_shows_descriptions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["settings"]) == 0
    out = capsys.readouterr().out.splitlines()
    line = next(x for x in out if x.startswith("memr3_max_iterations"))
    assert line == "memr3_max_iterations = 2  # MemR3: router calls per question (n_max) (paper: 5)"
    paper = next(x for x in out if x.startswith("hymem_answer_style"))
    assert "(paper: \"full\")" in paper
