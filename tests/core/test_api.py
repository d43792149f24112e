"""The public API: everything a host app needs comes from `import recollect` (langmem-style factories)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from langgraph.checkpoint.memory import InMemorySaver

import recollect
from recollect import (
    AllMethodsContext,
    ContextError,
    HyMemContext,
    MemR3Context,
    ask,
    create_graph,
    create_memr3_graph,
    create_recall_tool,
    create_retriever,
    forget,
    ingest,
    load_dialogue,
)
from recollect.llm.scripted import scripted


def _answers(msgs: list, kw: dict) -> dict:
    return {"answer": "Biscuit", "supports": ["D1:3"], "evidence": ["[D1:3] Maya's dog is Biscuit"], "gaps": [],
            "decision": "answer", "detailed_answer": "Biscuit"}


def test_every_name_in___all___resolves() -> None:
    for name in recollect.__all__:
        assert getattr(recollect, name) is not None, name
    with pytest.raises(AttributeError):
        recollect.no_such_thing  # noqa: B018


def test_importing_settings_does_not_load_langgraph() -> None:
    # The model server's guard process imports recollect.llm.*: the package itself must stay light.
    code = "import sys, recollect.settings; print('langgraph' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_ingest_create_graph_ask_forget(data_dir: str, sample_path) -> None:
    reports = ingest(sample_path, "maya", methods=["memr3"], data_dir=data_dir)
    assert [r.method for r in reports] == ["turns", "memr3"]
    model = scripted(default=_answers)
    graph = create_graph("rag", chat_model=model, data_dir=data_dir, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    out = graph.invoke({"namespace": "maya", "question": "What is Maya's dog called?"}, config)
    assert out["answer"] == "Biscuit"
    assert graph.get_state(config).values["question"] == "What is Maya's dog called?"  # reaches the graph
    # a run may override the bound settings
    over = graph.invoke({"namespace": "maya", "question": "Dog?"}, {"configurable": {"thread_id": "u"}},
                        context=AllMethodsContext(data_dir=data_dir, chat_model=scripted(default={"answer": "Rex"})))
    assert over["answer"] == "Rex"
    state = ask("What is Maya's dog called?", "maya", "memr3", data_dir=data_dir, chat_model=model)
    assert state["answer"] == "Biscuit" and state["supports"] == ["D1:3"]
    removed = forget("maya", data_dir=data_dir)
    assert removed["documents"] > 0
    with pytest.raises(ValueError, match="maya"):
        ask("Dog?", "maya", "memr3", data_dir=data_dir, chat_model=model)


def test_settings_are_checked_per_method(data_dir: str) -> None:
    graph = create_memr3_graph(memr3_top_k=8, data_dir=data_dir)
    assert type(graph.kwargs["context"]) is MemR3Context and graph.kwargs["context"].memr3_top_k == 8
    with pytest.raises(ContextError, match="hymem_light_k"):
        create_graph("memr3", hymem_light_k=3)
    hymem = create_graph("hymem", context=AllMethodsContext(profile="paper", data_dir=data_dir))
    assert type(hymem.kwargs["context"]) is HyMemContext and hymem.kwargs["context"].hymem_answer_style == "full"
    with pytest.raises(ValueError, match="unknown method"):
        create_graph("nope")


def test_recall_tool_and_retriever(data_dir: str, sample_path) -> None:
    ingest(load_dialogue(sample_path), "maya", methods=["memr3"], data_dir=data_dir)
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=scripted(default=_answers))
    tool = create_recall_tool("rag", namespace="maya", context=ctx)
    assert tool.invoke({"question": "What is Maya's dog called?"})["answer"] == "Biscuit"
    docs = create_retriever("maya", k=3, context=ctx).invoke("dog")
    assert len(docs) == 3 and all(d.id and d.metadata["turn_ids"] for d in docs)
