"""MemR3: a closed-loop retrieval controller with an evidence–gap tracker.

START → retrieve → router ─┬─ retrieve → router …
                           ├─ reflect  → router …
                           └─ answer   → END

`router` is the only LLM decision per iteration; `retrieve` and `reflect` never call the LLM.
Budgets (iteration cap, reflect-streak cap, retrieval-opportunity check) are enforced here, in
code, and announced to the model through the decision directive and the JSON schema's enum.
See specs/methods/memr3.md.

Three settings make the answer rest on what the loop saw rather than only on the router's notes
(each one value away from the spec): `memr3_answer_snippets` shows the answer call the turns,
`memr3_keep_cited_evidence` keeps cited evidence the router dropped, and
`memr3_prefer_grounded_draft` keeps a grounded draft over "No information available".
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, create_model, field_validator

from recollect.answer_rewrite import REWRITE_MEMORIES, rewrite_answer
from recollect.dialogue.turn_ids import TurnIdMatcher
from recollect.graphs.memr3.settings import MemR3Context
from recollect.graphs.memr3.state import MemR3State
from recollect.llm.models import get_chat_model
from recollect.llm.structured import call_structured
from recollect.llm.usage import estimate_tokens, merge_usage
from recollect.prompts import load_prompt, render_prompt
from recollect.state import InputState, OutputState
from recollect.steps import (
    NO_INFO,
    AnswerReply,
    bullets,
    clean_answer,
    critical_from_turns,
    grounded_in,
    grounded_supports,
    is_no_info,
    messages,
    snippet_source,
    wire_question_lifecycle,
    workspace,
)
from recollect.trace import emit

DECISIONS = ("retrieve", "reflect", "answer")
# Dropped evidence bullets carried over per router call (memr3_keep_cited_evidence): the schema lets
# the router write 6, so the tracker stays within about twice the spec's size.
MAX_CARRIED_EVIDENCE = 6


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


def _opportunity(state: MemR3State, ctx: MemR3Context) -> bool:
    """Some chunk with no masked turn remains, and the retrieval-attempt budget is not spent."""
    if state.get("memr3_retrieval_attempts", 0) >= ctx.memr3_retrieval_budget:
        return False
    left = snippet_source(ctx, state["namespace"]).has_unmasked(state.get("masks") or [])
    return left is not False


def _snippet_lines(snippets: list[dict[str, Any]]) -> str:
    return "\n".join(s["text"] for s in snippets) if snippets else "(no new snippets)"


def _carry_cited(old: list[str], new: list[str], masks: list[str]) -> list[str]:
    """Old bullets citing a shown turn that no new bullet cites (the router dropped them), newest kept."""
    matcher = TurnIdMatcher(masks)
    covered = set(matcher.find(new))
    carried = [b for b in old if b not in new and (ids := matcher.find(b)) and not set(ids) <= covered]
    return carried[:MAX_CARRIED_EVIDENCE]


# --- nodes -------------------------------------------------------------------------------------


def retrieve(state: MemR3State, runtime: Runtime[MemR3Context]) -> dict[str, Any]:
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


def router(state: MemR3State, runtime: Runtime[MemR3Context]) -> dict[str, Any]:
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
    carried: list[str] = []
    if reply is not None:
        if ctx.memr3_keep_cited_evidence:
            carried = _carry_cited(evidence, reply.evidence, state.get("masks") or [])
        evidence, gaps = reply.evidence + carried, reply.gaps
        decision = reply.decision if reply.decision in DECISIONS else "reflect"
        if reply.decision not in DECISIONS:
            note["unknown_decision"] = reply.decision
    else:
        decision = "retrieve" if _opportunity(state, ctx) else "answer"
        note = res.failure_note()
    if forced:  # on the budget call `forced` is "answer", so the iteration cap needs no second check
        decision = forced

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
        carried_evidence=carried,
        **note,
    )
    return update


def reflect(state: MemR3State, runtime: Runtime[MemR3Context]) -> dict[str, Any]:
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


def _router_fell_back(state: MemR3State) -> bool:
    routers = [r for r in state.get("trace") or [] if r.get("node") == "router"]
    return bool(routers and routers[-1].get("fallback"))


def _answer_turns(state: MemR3State, ctx: MemR3Context, evidence_ids: list[str], budget: int) -> list[tuple[list[str], str]]:
    """(turn ids, text) shown to the answer call: the latest snippets, then the cited turns not in them."""
    out: list[tuple[list[str], str]] = []
    used = 0
    for snippet in state.get("memr3_snippets") or []:
        cost = estimate_tokens(snippet["text"])
        if out and used + cost > budget:
            break
        out.append((list(snippet["turn_ids"]), snippet["text"]))
        used += cost
    in_snippets = {t for ids, _ in out for t in ids}
    missing = [t for t in evidence_ids if t not in in_snippets]
    turns = workspace(ctx).turns(state["namespace"]) if missing and ctx.retriever is None else {}
    for tid in missing:  # a foreign retriever's turn text survives only in the evidence bullets
        turn = turns.get(tid)
        if turn is None:
            continue
        line = turn.render()
        if used + estimate_tokens(line) > budget:
            break
        out.append(([tid], line))
        used += estimate_tokens(line)
    return out


def answer(state: MemR3State, runtime: Runtime[MemR3Context]) -> dict[str, Any]:
    ctx = runtime.context
    question = state["question"]
    evidence = list(state.get("evidence") or [])
    draft = clean_answer(state.get("draft_answer"))
    masks = list(state.get("masks") or [])
    matcher = TurnIdMatcher(masks)
    evidence_ids = matcher.find(evidence)

    mode = ctx.memr3_answer_snippets
    thin = not evidence_ids or _router_fell_back(state)
    show_turns = mode == "always" or (mode == "when_thin" and thin)
    values = {"question": question, "evidence": bullets(evidence), "draft": draft or "(none)"}
    shown: list[tuple[list[str], str]] = []
    if show_turns:
        fixed = estimate_tokens(load_prompt("memr3", "answer_turns") + "".join(values.values())) + 150
        shown = _answer_turns(state, ctx, evidence_ids, ctx.max_prompt_tokens - fixed)
        user = render_prompt("memr3", "answer_turns", turns="\n".join(t for _, t in shown) or "(none)", **values)
    else:
        user = render_prompt("memr3", "answer", **values)
    res = call_structured(
        get_chat_model(ctx), messages(None, user), AnswerReply, node="answer",
        method=ctx.structured_method, max_tokens=120,
    )
    reply = res.value
    replied = clean_answer(reply.answer) if reply else ""
    snippet_texts = [s["text"] for s in state.get("memr3_snippets") or []]
    if reply is not None and not is_no_info(replied):
        text, source = replied, "answer call"
    elif reply is not None and ctx.memr3_prefer_grounded_draft and draft and not is_no_info(draft) \
            and grounded_in(draft, evidence + snippet_texts + [t for _, t in shown]):
        text, source = draft, "grounded draft (the answer call found no answer)"
    elif reply is not None:
        text, source = NO_INFO, "answer call"
    else:  # spec fallback: the draft, else the reply's own text unless it is only JSON
        raw = clean_answer(res.raw)
        text, source = next(((t, f) for t, f in ((draft, "draft"), (raw, "raw reply")) if t and not is_no_info(t)),
                            (NO_INFO, "no info"))

    shown_ids = [t for ids, _ in shown for t in ids]
    citable = set(evidence_ids) | set(shown_ids)
    chosen = [i for i in matcher.resolve(reply.supports if reply else []) if i in citable] or evidence_ids
    supports = list(chosen)
    grounded = not supports
    if grounded:  # our addition: no usable citation, so fall back to shown turns containing the answer
        supports = grounded_supports(ctx, state["namespace"], text, masks)
    # A foreign retriever has no turn store: the snippet, or the evidence bullet citing a turn, is its text.
    texts = {t: b for b in reversed(evidence) for t in matcher.find(b)}
    texts.update({t: s["text"] for s in state.get("memr3_snippets") or [] for t in s["turn_ids"]})
    critical = critical_from_turns(ctx, state["namespace"], supports, fallback=texts)
    usage, rewrite_note = res.usage, {}
    if ctx.memr3_answer_rewrite and not is_no_info(text):
        # Our addition (false = spec): the span rewrite MRAgent and MGRetrieval end with, shown the
        # turns the answer rests on with their dates, so "last week" or "2023-05-25" becomes a date.
        rewritten = rewrite_answer(ctx, question, text, critical[:REWRITE_MEMORIES], node="rewrite_answer")
        usage = merge_usage(usage, rewritten.usage)
        rewrite_note = rewritten.trace_fields(text)
        text = rewritten.answer
    return {
        "answer": text,
        "supports": supports,
        "critical_memories": critical,
        "usage": usage,
        "trace": emit("answer", answer=text, answer_from=source, supports=supports, **rewrite_note,
                      turns_shown=shown_ids if show_turns else None, thin_evidence=thin,
                      supports_from="answer text found in shown turns" if grounded and supports else None,
                      **(res.failure_note() if not reply else {})),
    }


def route_after_router(state: MemR3State) -> Literal["retrieve", "reflect", "answer"]:
    decision = state.get("memr3_decision")
    return decision if decision in DECISIONS else "reflect"  # type: ignore[return-value]


builder = StateGraph(MemR3State, context_schema=MemR3Context, input_schema=InputState, output_schema=OutputState)
builder.add_node("retrieve", retrieve)
builder.add_node("router", router)
builder.add_node("reflect", reflect)
builder.add_node("answer", answer)
builder.add_edge("retrieve", "router")
builder.add_conditional_edges("router", route_after_router, ["retrieve", "reflect", "answer"])
builder.add_edge("reflect", "router")
wire_question_lifecycle(builder, "retrieve", "answer")

graph = builder.compile()
graph.name = "memr3"


def recursion_limit(ctx: MemR3Context) -> int:
    return max(4 * ctx.memr3_max_iterations, 10)
