"""The evidence funnel: the stage each gold turn reached, and what each method's memory can reach."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from recollect.eval import funnel
from recollect.eval.funnel import FUNNEL_FIELDS, evidence_stages, funnel_fields
from recollect.graphs.registry import METHODS, AllMethodsContext, memory_turn_ids
from recollect.llm.scripted import ScriptedChatModel


def test_each_gold_turn_gets_the_last_stage_it_reached() -> None:
    stages = evidence_stages(["D1:1", "D1:2", "D1:3", "D1:4", "D1:5"], in_memory=["D1:1", "D1:2", "D1:3", "D1:4"],
                             retrieved=["D1:2", "D1:3", "D1:4"], shown=["D1:3", "D1:4"], cited=["D1:4"])
    assert stages == {"D1:1": "in_memory", "D1:2": "retrieved", "D1:3": "shown", "D1:4": "cited",
                      "D1:5": "not_in_memory"}


def test_fields_count_a_shown_turn_as_retrieved(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(funnel, "memory_reach", lambda method, ctx, ns: frozenset({"D1:1", "D1:2"}))
    # a step that showed D1:2 without recording it as retrieved still brought it in
    state = {"retrieved_turn_ids": ["D1:1"], "shown_turn_ids": ["D1:2"], "supports": ["D1:2"]}
    out = funnel_fields("rag", None, "ns", state, ["D1:1", "D1:2", "D2:1", "D2:2"])
    assert [out[f] for f in FUNNEL_FIELDS] == [0.5, 0.5, 0.25, 0.25]
    assert out["evidence_stages"]["D1:1"] == "retrieved" and out["evidence_stages"]["D2:1"] == "not_in_memory"
    assert funnel_fields("rag", None, "ns", state, [])["evidence_in_memory"] is None  # no gold: excluded


def test_a_namespace_the_method_never_built_reaches_nothing(tmp_path: Path) -> None:
    funnel.forget_reach_cache()
    ctx = AllMethodsContext(data_dir=str(tmp_path / "data"))
    out = funnel_fields("hymem", ctx, "never-ingested", {}, ["D1:1"])
    assert out["evidence_in_memory"] == 0.0 and out["evidence_stages"] == {"D1:1": "not_in_memory"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, AllMethodsContext]:
    """The sample dialogue ingested by every builder with a model whose replies are all unusable: each
    builder falls back to its memory without the model, which must still reach the turns."""
    from recollect.dialogue.loaders import load_conversation
    from recollect.ingestion import ingest_conversation
    from recollect.memory.workspace import open_workspace

    ctx = AllMethodsContext(data_dir=str(tmp_path_factory.mktemp("funnel") / "data"),
                            chat_model=ScriptedChatModel(default=lambda messages, kwargs: "not json"))
    conv = load_conversation(Path(__file__).resolve().parents[2] / "examples" / "sample_dialogue.json")
    ingest_conversation(conv, "sample", ctx)
    return open_workspace(ctx.data_dir), ctx


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_names_the_turns_its_memory_reaches(built: tuple[Any, AllMethodsContext], method: str) -> None:
    ws, ctx = built
    turns = set(ws.turns("sample"))
    reach = memory_turn_ids(method, ws, "sample", ctx)
    assert reach and reach <= turns, method
    if METHODS[method].memory_name in (None, "memr3", "hymem"):  # whole-history structures: every turn
        assert reach == turns, method


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_graph_records_what_its_retrieval_brought_in(built: tuple[Any, AllMethodsContext], method: str) -> None:
    from recollect.runner import ask

    _, ctx = built
    state = ask("sample", "Where did Maya adopt the beagle Biscuit?", method, ctx)
    shown, retrieved = set(state.get("shown_turn_ids") or []), set(state.get("retrieved_turn_ids") or [])
    assert retrieved, method  # every graph retrieves something from a non-empty memory
    assert shown <= retrieved, (method, shown - retrieved)  # nothing is shown that no step brought in


def test_the_report_names_the_stage_each_gold_turn_was_lost_at(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(funnel, "memory_reach", lambda method, ctx, ns: frozenset({"D1:1", "D1:2", "D1:3"}))
    state = {"retrieved_turn_ids": ["D1:2", "D1:3"], "shown_turn_ids": ["D1:3"], "supports": []}
    lines = funnel.evidence_report("rag", None, "ns", state, ["D1:1", "D1:2", "D1:3", "D9:9"])
    assert [line.split(": ", 1)[1].split(":")[0] for line in lines] == [
        "lost in retrieval", "lost in packing", "lost in answering", "lost in memory"]
