"""MemR3: a closed-loop retrieval controller with an evidence–gap tracker (README.md in this folder).

START → retrieve → router ─┬─ retrieve → router …
                           ├─ reflect  → router …
                           └─ answer   → END

`router` (`router.py`) is the only LLM decision per iteration; `retrieve` and `reflect` (`nodes.py`)
never call the LLM; `answer` (`answer.py`) makes the one answer call. Budgets (iteration cap,
reflect-streak cap, retrieval-opportunity check) are enforced in code and announced to the model
through the decision directive and the JSON schema's enum. This module holds the edges and the
compiled `graph`.
"""

from __future__ import annotations

from typing import Literal

from langgraph.graph import StateGraph

from recollect.graphs.memr3.answer import answer
from recollect.graphs.memr3.nodes import reflect, retrieve
from recollect.graphs.memr3.router import DECISIONS, router
from recollect.graphs.memr3.settings import MemR3Context
from recollect.graphs.memr3.state import MemR3State
from recollect.state import InputState, OutputState
from recollect.steps import wire_question_lifecycle


def route_after_router(state: MemR3State) -> Literal["retrieve", "reflect", "answer"]:
    decision = state.get("memr3_decision")
    return decision if decision in DECISIONS else "reflect"  # type: ignore[return-value]


builder = StateGraph(MemR3State, context_schema=MemR3Context, input_schema=InputState,
                     output_schema=OutputState)
builder.add_node("retrieve", retrieve)
builder.add_node("router", router)
builder.add_node("reflect", reflect)
builder.add_node("answer", answer)
builder.add_edge("retrieve", "router")
builder.add_conditional_edges("router", route_after_router, ["retrieve", "reflect", "answer"])
builder.add_edge("reflect", "router")
wire_question_lifecycle(builder, "retrieve", "answer", "memr3")

graph = builder.compile()
graph.name = "memr3"


def recursion_limit(ctx: MemR3Context) -> int:
    return max(4 * ctx.memr3_max_iterations, 10)
