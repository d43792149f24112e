"""MemR3: a closed-loop retrieval controller with an evidence–gap tracker.

START → retrieve → router ─┬─ retrieve → router …
                           ├─ reflect  → router …
                           └─ answer   → END

`router` is the only LLM decision per iteration; `retrieve` and `reflect` never call the LLM.
Budgets (iteration cap, reflect-streak cap, retrieval-opportunity check) are enforced here, in
code, and announced to the model through the decision directive and the JSON schema's enum.
See specs/methods/memr3.md.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, create_model, field_validator

from app.config import Context
from app.llm.models import get_chat_model
from app.llm.structured import call_structured
from app.llm.usage import estimate_tokens
from app.prompts import load_prompt, render_prompt
from app.state import InputState, MemoryState, OutputState
from app.trace import emit
from graphs.common import (
    NO_INFO,
    TURN_ID,
    AnswerReply,
    bullets,
    cited_ids,
    critical_from_turns,
    grounded_supports,
    messages,
    snippet_source,
)

DECISIONS = ("retrieve", "reflect", "answer")
BUDGET_NOTE = "iteration budget reached"


def _list_cap(items: int, chars: int) -> dict[str, Any]:
    return {"maxItems": items, "items": {"type": "string", "maxLength": chars}}


def _text_cap(chars: int) -> Any:
    """maxLength on the string branch of an optional string (a grammar ignores it beside `anyOf`)."""

    def extra(schema: dict[str, Any]) -> None:
        for branch in schema.get("anyOf", [schema]):
            if branch.get("type") == "string":
                branch["maxLength"] = chars

    return extra


class RouterReply(BaseModel):
    """The router's JSON. Lenient on shape: the graph, not the schema, enforces decisions."""

    # The length caps only shape the schema sent to the endpoint (a grammar on llama.cpp): a small model
    # otherwise fills an optional field it was told to skip with a repeating loop until max_tokens
    # (measured: a 400-token "reasoning" loop on an answer decision, 84 s of CPU time). Validation
    # does not enforce them.
    evidence: list[str] = Field(default_factory=list, json_schema_extra=_list_cap(6, 300))
    gaps: list[str] = Field(default_factory=list, json_schema_extra=_list_cap(6, 200))
    decision: str
    retrieval_query: str | None = Field(default=None, json_schema_extra=_text_cap(200))
    detailed_answer: str | None = Field(default=None, json_schema_extra=_text_cap(300))
    reasoning: str | None = Field(default=None, json_schema_extra=_text_cap(300))

    @field_validator("evidence", "gaps", mode="before")
    @classmethod
    def _lines(cls, v: Any) -> Any:
        if v is None:
            return []
        if isinstance(v, str):
            v = v.splitlines()
        if isinstance(v, list):
            out = [str(x).strip().lstrip("-• ").strip() for x in v if x is not None]
            return [x for x in out if x and x.lower() not in ("none", "n/a", "[]")]
        return v

    @field_validator("decision", mode="before")
    @classmethod
    def _decision(cls, v: Any) -> Any:
        return "" if v is None else str(v).strip().lower()

    @field_validator("retrieval_query", "detailed_answer", "reasoning", mode="before")
    @classmethod
    def _opt_text(cls, v: Any) -> Any:
        if v is None or isinstance(v, str):
            return v
        return str(v)


def router_schema(allowed: tuple[str, ...]) -> type[RouterReply]:
    """The reply model whose JSON schema lists only the allowed decisions (sent to the endpoint)."""
    return create_model(  # type: ignore[call-overload]
        "RouterDecision",
        __base__=RouterReply,
        decision=(str, Field(json_schema_extra={"enum": list(allowed)})),
    )


_SCHEMAS = {a: router_schema(a) for a in [DECISIONS, *((d,) for d in DECISIONS)]}


def _opportunity(state: MemoryState, ctx: Context) -> bool:
    """Some chunk with no masked turn remains, and the retrieval-attempt budget is not spent."""
    if state.get("memr3_retrieval_attempts", 0) >= ctx.memr3_retrieval_budget:
        return False
    left = snippet_source(ctx, state["namespace"]).has_unmasked(state.get("masks") or [])
    return left is not False


def _snippet_lines(snippets: list[dict[str, Any]]) -> str:
    return "\n".join(s["text"] for s in snippets) if snippets else "(no new snippets)"


# --- nodes -------------------------------------------------------------------------------------


def retrieve(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    question = state["question"]
    refinement = (state.get("query") or "").strip()
    query_text = f"{question}. {refinement}" if refinement else question
    units = snippet_source(ctx, state["namespace"]).retrieve(query_text, state.get("masks") or [], ctx.memr3_top_k)

    # Prompt budget: drop the lowest-ranked chunks first; dropped chunks are not masked.
    fixed = estimate_tokens(
        load_prompt("memr3", "router_system") + question + "\n".join(state.get("evidence") or [])
        + "\n".join(state.get("gaps") or []) + (state.get("memr3_reasoning") or "")
    ) + 150
    kept, used, dropped = [], fixed, []
    for u in units:
        cost = estimate_tokens(u.text)
        if kept and used + cost > ctx.max_prompt_tokens:
            dropped.append(u.id)
            continue
        kept.append(u)
        used += cost

    snippets = [{"chunk_id": u.id, "turn_ids": list(u.turn_ids), "text": u.text} for u in kept]
    turn_ids = [t for u in kept for t in u.turn_ids]
    return {
        "memr3_snippets": snippets,
        "retrieved": snippets,
        "masks": turn_ids,
        "memr3_queries": [refinement] if refinement else [],
        "query": None,
        "memr3_retrieval_attempts": state.get("memr3_retrieval_attempts", 0) + 1,
        "memr3_reflect_streak": 0,
        "memr3_forced": None if kept else "reflect",
        "trace": emit(
            "retrieve",
            query_text=query_text,
            chunk_ids=[u.id for u in kept],
            turn_ids=turn_ids,
            dropped_for_budget=dropped,
            forced_next="reflect" if not kept else None,
            shown_turn_ids=turn_ids,
        ),
    }


def router(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    iteration = state.get("iteration", 0)
    budget_call = iteration + 1 >= ctx.memr3_max_iterations
    forced = "answer" if budget_call else state.get("memr3_forced")
    allowed = (forced,) if forced else DECISIONS
    directive = (
        render_prompt("memr3", "directive_forced", decision=forced) if forced else load_prompt("memr3", "directive_normal")
    )
    queries = state.get("memr3_queries") or []
    user = render_prompt(
        "memr3",
        "router_user",
        question=state["question"],
        evidence=bullets(state.get("evidence") or []),
        gaps=bullets(state.get("gaps") or []),
        snippets=_snippet_lines(state.get("memr3_snippets") or []),
        reasoning=state.get("memr3_reasoning") or "(none)",
        prior_query=queries[-1] if queries else "(none)",
    )
    system = render_prompt("memr3", "router_system", directive=directive)
    res = call_structured(
        get_chat_model(ctx), messages(system, user), _SCHEMAS[allowed], node="router",
        method=ctx.structured_method, max_tokens=400,
    )

    evidence = list(state.get("evidence") or [])
    gaps = list(state.get("gaps") or [])
    reply = res.value
    note: dict[str, Any] = {}
    if reply is not None:
        evidence, gaps = reply.evidence, reply.gaps
        decision = reply.decision if reply.decision in DECISIONS else "reflect"
        if reply.decision not in DECISIONS:
            note["unknown_decision"] = reply.decision
    else:
        decision = "retrieve" if _opportunity(state, ctx) else "answer"
        note = res.failure_note()
    if forced:
        decision = forced
    if iteration + 1 >= ctx.memr3_max_iterations and decision != "answer":  # safety net
        decision, gaps = "answer", [BUDGET_NOTE]

    update: dict[str, Any] = {
        "iteration": iteration + 1,
        "evidence": evidence,
        "gaps": gaps,
        "memr3_decision": decision,
        "memr3_forced": None,
        "memr3_decision_forced": forced is not None,
        "memr3_tracker": [{"iteration": iteration + 1, "decision": decision, "evidence": evidence, "gaps": gaps}],
        "usage": res.usage,
    }
    if decision == "retrieve":
        update["query"] = (reply.retrieval_query or "").strip() if reply else ""
    if decision == "answer":
        update["draft_answer"] = (reply.detailed_answer or "").strip() if reply else state.get("draft_answer")
    if decision == "reflect":
        update["memr3_reasoning"] = (reply.reasoning or "").strip() if reply else None
        update["memr3_reflect_streak"] = state.get("memr3_reflect_streak", 0) + 1
    else:
        update["memr3_reasoning"] = None
        update["memr3_reflect_streak"] = 0
    update["trace"] = emit(
        "router",
        iteration=iteration + 1,
        decision=decision,
        forced=forced,
        model_decision=reply.decision if reply else None,
        query=update.get("query"),
        evidence=evidence,
        gaps=gaps,
        n_evidence=len(evidence),
        n_gaps=len(gaps),
        **note,
    )
    return update


def reflect(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    forced = bool(state.get("memr3_decision_forced"))
    streak_hit = state.get("memr3_reflect_streak", 0) >= ctx.memr3_max_reflect_streak
    opportunity = _opportunity(state, ctx)
    nxt = "retrieve" if (forced or streak_hit) and opportunity else None
    return {
        "memr3_forced": nxt,
        "trace": emit(
            "reflect", reasoning=state.get("memr3_reasoning"), forced=forced, streak_hit=streak_hit,
            opportunity=opportunity, forced_next=nxt,
        ),
    }


def answer(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    evidence = state.get("evidence") or []
    draft = state.get("draft_answer") or ""
    shown = bullets(evidence)
    snippets = state.get("memr3_snippets") or [] if ctx.memr3_answer_snippets else []
    if snippets:  # memr3_answer_snippets: the router's evidence may have missed what the snippets say
        shown += render_prompt("memr3", "answer_snippets", snippets=_snippet_lines(snippets))
    user = render_prompt("memr3", "answer", question=state["question"], evidence=shown, draft=draft or "(none)")
    res = call_structured(
        get_chat_model(ctx), messages(None, user), AnswerReply, node="answer",
        method=ctx.structured_method, max_tokens=120,
    )
    reply = res.value
    text = (reply.answer.strip() if reply else "") or draft or (res.raw.strip() if not reply else "") or NO_INFO

    masks = list(state.get("masks") or [])
    joined = "\n".join(evidence)
    # LoCoMo-style ids are found by pattern; ids of a foreign retriever are found by their brackets.
    evidence_ids = cited_ids(evidence) + [m for m in masks if not TURN_ID.fullmatch(m) and f"[{m}]" in joined]
    citable = set(evidence_ids) | {t for s in snippets for t in s["turn_ids"]}
    chosen = [i for i in (reply.supports if reply else []) if i in citable] or evidence_ids
    supports = [i for i in chosen if i in set(masks)]
    grounded = not supports
    if grounded:  # our addition: no usable citation, so fall back to shown turns containing the answer
        supports = grounded_supports(ctx, state["namespace"], text, masks)
    return {
        "answer": text,
        "supports": supports,
        "critical_memories": critical_from_turns(ctx, state["namespace"], supports),
        "usage": res.usage,
        "trace": emit("answer", answer=text, supports=supports,
                      supports_from="answer text found in shown turns" if grounded and supports else None,
                      **(res.failure_note() if not reply else {})),
    }


def route_after_router(state: MemoryState) -> Literal["retrieve", "reflect", "answer"]:
    decision = state.get("memr3_decision")
    return decision if decision in DECISIONS else "reflect"  # type: ignore[return-value]


builder = StateGraph(MemoryState, context_schema=Context, input_schema=InputState, output_schema=OutputState)
builder.add_node("retrieve", retrieve)
builder.add_node("router", router)
builder.add_node("reflect", reflect)
builder.add_node("answer", answer)
builder.add_edge(START, "retrieve")
builder.add_edge("retrieve", "router")
builder.add_conditional_edges("router", route_after_router, ["retrieve", "reflect", "answer"])
builder.add_edge("reflect", "router")
builder.add_edge("answer", END)

graph = builder.compile()
graph.name = "memr3"


def recursion_limit(ctx: Context) -> int:
    return max(4 * ctx.memr3_max_iterations, 10)
