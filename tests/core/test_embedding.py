"""A compiled graph is a LangChain Runnable: inside an LCEL chain, as a tool, and as a subgraph."""

from __future__ import annotations

import json

from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from recollect.graphs.memr3.graph import graph
from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import scripted
from tests.helpers import make_conversation

CONV = make_conversation([[("Ann", "my cat is called Pixel"), ("Bob", "nice, my dog is Rex")]])


def _ctx(data_dir: str) -> AllMethodsContext:
    ingest_conversation(CONV, "app", AllMethodsContext(data_dir=data_dir), methods=["memr3"])
    model = scripted(default=lambda msgs, kw: (
        {"evidence": ["[D1:1] Ann's cat is Pixel"], "gaps": [], "decision": "answer", "detailed_answer": "Pixel"}
        if "decision" in json.dumps(kw.get("response_format", {})) else {"answer": "Pixel", "supports": ["D1:1"]}))
    return AllMethodsContext(data_dir=data_dir, chat_model=model)


def test_graph_inside_an_lcel_chain(data_dir: str) -> None:
    ctx = _ctx(data_dir)
    chain = (
        RunnableLambda(lambda q: {"namespace": "app", "question": q})
        | graph.bind(context=ctx)
        | RunnableLambda(lambda s: f"{s['answer']} ({', '.join(s['supports'])})")
    )
    assert chain.invoke("What is Ann's cat called?") == "Pixel (D1:1)"
    assert chain.batch(["cat?", "pet?"]) == ["Pixel (D1:1)", "Pixel (D1:1)"]


def test_graph_as_a_tool(data_dir: str) -> None:
    ctx = _ctx(data_dir)
    tool = graph.bind(context=ctx).as_tool(name="recall", description="Answer from the user's dialogue memory",
                                           arg_types={"namespace": str, "question": str})
    out = tool.invoke({"namespace": "app", "question": "What is Ann's cat called?"})
    assert out["answer"] == "Pixel" and out["supports"] == ["D1:1"]
    assert set(tool.args) >= {"namespace", "question"}


class Outer(TypedDict, total=False):
    namespace: str
    question: str
    answer: str


def test_graph_as_a_subgraph(data_dir: str) -> None:
    ctx = _ctx(data_dir)
    outer = StateGraph(Outer, context_schema=AllMethodsContext)
    outer.add_node("memory", graph)
    outer.add_edge(START, "memory")
    outer.add_edge("memory", END)
    out = outer.compile().invoke({"namespace": "app", "question": "cat?"}, context=ctx)
    assert out["answer"] == "Pixel"
