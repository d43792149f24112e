"""MGRetrieval: memory-guided reflective retrieval over a keyword pyramid.

START → select_keywords → build_pyramid → retrieve_round ─┬─ a group with new memories → assess
                                                          └─ pyramid exhausted        → answer step
assess ─┬─ sufficient, or iteration ≥ mg_max_rounds → answer step
        └─ otherwise                                 → retrieve_round
answer step: final_answer when mg_final_answer_tokens > 0, else rewrite (the spec)
final_answer ─┬─ an answer    → END
              └─ none usable  → rewrite
rewrite → END

Our additions to the spec's rounds, each a `MGRetrievalContext` setting whose other value is the spec:
`mg_assess_grounding` (a "sufficient" answer must be found in the memories shown), `mg_dense_fill`
(a narrow group is topped up with the question's nearest unmasked turns), `mg_exhausted_fallback`
(rounds left after the pyramid are dense rounds), `mg_keep_critical_when_none` (a reply naming no
memory keeps H(r-1) ∪ R̃(r)), `mg_rewrite_keep_draft` (the rewrite may not drop the answer) and
`mg_final_answer_tokens` (rag's answer step over the turns the rounds showed and brought in).

`select_keywords` (selection.py) is one call to the auxiliary model (p_r1); `assess` (p_r2),
`final_answer` and `rewrite` (p_r3) (answering.py) use the main model; `build_pyramid` (pyramid.py) and `retrieve_round`
(rounds.py) are deterministic. Trace records of LLM nodes carry `llm_role` ("aux" or "main") so costs
can be reported separately. Budgets (keywords, rounds, new memories per round, critical memories,
prompt size) are enforced in the nodes, never by the prompt. See README.md in this folder ("The graph")
and graphs/mgretrieval/DESIGN.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime

from recollect.graphs.mgretrieval.answering import assess, final_answer, rewrite
from recollect.graphs.mgretrieval.metrics import AUX_LLM_NODES, round_kinds
from recollect.graphs.mgretrieval.pyramid import build_pyramid
from recollect.graphs.mgretrieval.rounds import retrieve_round
from recollect.graphs.mgretrieval.selection import select_keywords
from recollect.graphs.mgretrieval.settings import MGRetrievalContext
from recollect.graphs.mgretrieval.state import MGRetrievalState
from recollect.state import InputState, OutputState
from recollect.steps import wire_question_lifecycle

# The registry reads `graph` and `recursion_limit`, and from every graph module `AUX_LLM_NODES` (usage
# reported as the auxiliary model's) and `eval_fields` (the method's own eval columns).
__all__ = ["AUX_LLM_NODES", "builder", "eval_fields", "graph", "recursion_limit"]


AnswerStep = Literal["final_answer", "rewrite"]


def answer_step(ctx: MGRetrievalContext) -> AnswerStep:
    """Where the rounds end: our final answer call, or the spec's rewrite (mg_final_answer_tokens 0)."""
    return "final_answer" if ctx.mg_final_answer_tokens else "rewrite"


def route_after_retrieve(state: MGRetrievalState,
                         runtime: Runtime[MGRetrievalContext]) -> Literal["assess", "final_answer", "rewrite"]:
    if state.get("mg_exhausted") or not state.get("mg_new_memories"):
        return answer_step(runtime.context)
    return "assess"


def route_after_assess(state: MGRetrievalState,
                       runtime: Runtime[MGRetrievalContext]) -> Literal["retrieve_round", "final_answer", "rewrite"]:
    if state.get("mg_sufficient") or state.get("iteration", 0) >= runtime.context.mg_max_rounds:
        return answer_step(runtime.context)
    return "retrieve_round"


def route_after_final(state: MGRetrievalState) -> Literal["finish_question", "rewrite"]:
    # the final call sets `answer` only when it gave a usable one (start_question clears it)
    return "finish_question" if state.get("answer") else "rewrite"


builder = StateGraph(MGRetrievalState, context_schema=MGRetrievalContext, input_schema=InputState,
                     output_schema=OutputState)
builder.add_node("select_keywords", select_keywords)
builder.add_node("build_pyramid", build_pyramid)
builder.add_node("retrieve_round", retrieve_round)
builder.add_node("assess", assess)
builder.add_node("final_answer", final_answer)
builder.add_node("rewrite", rewrite)
builder.add_edge("select_keywords", "build_pyramid")
builder.add_edge("build_pyramid", "retrieve_round")
builder.add_conditional_edges("retrieve_round", route_after_retrieve, ["assess", "final_answer", "rewrite"])
builder.add_conditional_edges("assess", route_after_assess, ["retrieve_round", "final_answer", "rewrite"])
builder.add_conditional_edges("final_answer", route_after_final, ["finish_question", "rewrite"])
wire_question_lifecycle(builder, "select_keywords", "rewrite", "mgretrieval")

graph = builder.compile()
graph.name = "mgretrieval"


def eval_fields(state: Mapping[str, Any]) -> dict[str, int]:
    """The eval row's MGRetrieval columns (`recollect.graphs.registry.method_eval_fields`): the round kinds
    of the question, from the final state's `mg_round_log`."""
    return round_kinds(state)


def recursion_limit(ctx: MGRetrievalContext) -> int:
    """LangGraph steps a run may take with these settings (rounds times the nodes of a round, plus the
    rest)."""
    return 4 * ctx.mg_max_rounds + 20
