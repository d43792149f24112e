"""MRAgent: an agent that reconstructs the evidence for a question over a Cue–Tag–Content graph.

START → extract_cues → seed → navigate → route ─┬─ answer JSON → answer → END
                                                ├─ calls → tools ─┬─ rounds/calls left → navigate …
                                                │                 └─ budget exhausted → answer (forced)
                                                └─ nothing usable → navigate, or answer (forced)

`navigate` is the only LLM call of the loop; its prompt is rebuilt from state every round and shows
the kept memories H first (recollect.graphs.mragent.prompting). A turn joins `masks` only when a prompt rendered
its raw text. `route` is deterministic: it reads both tool protocols into one list of calls
(recollect.graphs.mragent.protocol), applies the keep/prune decision to H and enforces the per-round and
per-question call caps. `tools` runs the registry in recollect.graphs.mragent.tools. `answer` (answer.py) writes
the answer. See README.md in this folder.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from langchain_core.messages import HumanMessage
from langgraph.graph import StateGraph
from langgraph.runtime import Runtime

from recollect.graphs.mragent.answer import answer
from recollect.graphs.mragent.cues import (
    STOPWORDS,
    cue_norm,
    fallback_cues,
    lexical_question_cues,
    question_window,
)
from recollect.graphs.mragent.final import exchange
from recollect.graphs.mragent.layout import turn_of
from recollect.graphs.mragent.prompting import navigate_prompt, shown_update
from recollect.graphs.mragent.protocol import (
    NAVIGATE_MAX_TOKENS,
    NAVIGATE_MAX_TOKENS_UNBOUNDED,
    call_key,
    call_text,
    json_bound,
    keep_tool,
    parse_reply,
)
from recollect.graphs.mragent.schemas import (
    BoundedQuestionCuesReply,
    NavigateJSON,
    QuestionCuesReply,
)
from recollect.graphs.mragent.seed import build_seed, parse_window
from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.mragent.state import MRAgentState
from recollect.graphs.mragent.store import CueTagGraph
from recollect.graphs.mragent.tools import ToolContext, error_result, execute, structured_tools
from recollect.llm.models import get_chat_model
from recollect.llm.structured import call_structured, invoke_counted
from recollect.prompts import render_prompt
from recollect.state import InputState, OutputState
from recollect.steps import (
    wire_question_lifecycle,
    workspace,
)
from recollect.trace import emit

P = "mragent"


def _graph(ctx: MRAgentContext, namespace: str) -> CueTagGraph:
    return CueTagGraph.load(workspace(ctx), namespace)


def extract_cues(state: MRAgentState, runtime: Runtime[MRAgentContext]) -> dict[str, Any]:
    ctx = runtime.context
    g = _graph(ctx, state["namespace"])  # a namespace with no graph fails here, before any LLM call
    question = state["question"]
    if ctx.mra_question_cues == "lexical":
        return _lexical_cues(g, question)
    res = call_structured(
        get_chat_model(ctx), [HumanMessage(content=render_prompt(P, "question_cues", question=question))],
        BoundedQuestionCuesReply if ctx.mra_reply_bounds else QuestionCuesReply, node="extract_cues",
        method=ctx.structured_method, max_tokens=300,
    )
    note: dict[str, Any] = {}
    window = None
    cues: list[dict[str, Any]] = []
    if res.value is not None:
        cues = [{"cue": c.cue.strip(), "alternatives": [a.strip() for a in c.alternatives if a.strip()][:8]}
                for c in res.value.cues if c.cue.strip()]
        window = parse_window(res.value.time_window)
        if res.value.time_window.strip() and window is None:
            note["bad_time_window"] = res.value.time_window
    if not cues:
        note.update(res.failure_note() if res.value is None else {"fallback": True, "error": "no cues"})
        toks = [t for t in fallback_cues(question, 12) if t.lower() not in STOPWORDS]
        cues = [{"cue": t, "alternatives": []} for t in toks]
        window = None
    return {
        **_start(cues, window),
        "usage": res.usage,
        "trace": emit("extract_cues", cues=[c["cue"] for c in cues],
                      alternatives={c["cue"]: c["alternatives"] for c in cues}, time_window=window, **note),
    }


def _start(cues: list[dict[str, Any]], window: list[str] | None) -> dict[str, Any]:
    """The question's cues and window, and the loop's counters reset."""
    return {"mra_cues": cues, "mra_time_window": window,
            "mra_seen_cues": [n for c in cues if (n := cue_norm(c["cue"]))], "iteration": 0, "mra_calls_total": 0,
            "mra_forced_final": False, "draft_answer": None}


def _lexical_cues(g: CueTagGraph, question: str) -> dict[str, Any]:
    """mra_question_cues = lexical: the question's content words and their forms in the memory, no call."""
    cues = lexical_question_cues(question, g.vocabulary)
    window = parse_window(question_window(question))
    return {**_start(cues, window), "usage": {},
            "trace": emit("extract_cues", cues=[c["cue"] for c in cues],
                          alternatives={c["cue"]: c["alternatives"] for c in cues}, time_window=window,
                          skipped_call="mra_question_cues=lexical")}


def seed(state: MRAgentState, runtime: Runtime[MRAgentContext]) -> dict[str, Any]:
    ctx = runtime.context
    g = _graph(ctx, state["namespace"])
    found = build_seed(g, ctx, state["question"], state.get("mra_cues") or [], state.get("mra_time_window"),
                       set(state.get("masks") or []))
    # shown_turn_ids: the turns whose sentences the pre-selection calls showed (their trace records name them too)
    return {"mra_seed": found.sections, "mra_forced_final": ctx.mra_max_rounds <= 1, "usage": found.usage,
            "shown_turn_ids": found.shown_turn_ids, "retrieved_turn_ids": found.retrieved_turn_ids,
            "trace": found.records}


def after_seed(state: MRAgentState) -> Literal["answer", "navigate"]:
    return "answer" if state.get("mra_forced_final") else "navigate"


def navigate(state: MRAgentState, runtime: Runtime[MRAgentContext]) -> dict[str, Any]:
    ctx = runtime.context
    ns = state["namespace"]
    it = state.get("iteration", 0) + 1
    shown = navigate_prompt(state, ctx, _graph(ctx, ns))
    model = get_chat_model(ctx)
    cap = NAVIGATE_MAX_TOKENS if ctx.mra_reply_bounds else NAVIGATE_MAX_TOKENS_UNBOUNDED
    if ctx.mra_tool_protocol in ("auto", "native"):
        tools = [*structured_tools(ctx, ns, state["question"]), keep_tool()]
        bound = model.bind_tools(tools, tool_choice="auto", max_tokens=cap)
    else:
        bound = json_bound(model, ctx, NavigateJSON, cap)
    msg, usage = invoke_counted(bound, [HumanMessage(content=shown.prompt)], "navigate")
    content = msg.content if isinstance(msg.content, str) else json.dumps(msg.content)
    tool_calls = [{"name": tc.get("name"), "args": tc.get("args")} for tc in (msg.tool_calls or [])]
    for bad in getattr(msg, "invalid_tool_calls", None) or []:  # unparsable native args still count as calls
        tool_calls.append({"name": bad.get("name"), "args": bad.get("args")})
    update = shown_update(state, shown)
    return {
        **update,
        "iteration": it,
        "mra_raw_reply": {"content": content, "tool_calls": tool_calls},
        "mra_exchange": exchange(ctx, shown.prompt, content),
        "usage": usage,
        "trace": emit("navigate", round=it, protocol=ctx.mra_tool_protocol, prompt_tokens=usage.get("prompt_tokens"),
                      native_calls=len(tool_calls), reply=content[:300], kept_in_view=len(state.get("critical_memories") or []),
                      not_shown_for_room=shown.not_shown, shown_turn_ids=update["masks"]),
    }


def _apply_keep(
    state: MRAgentState, g: CueTagGraph, keep: list[str], prune: list[str], reason: str | None, rnd: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The model's keep/prune decision on H (`critical_memories`); only ids it has seen can be kept.

    Keeping does not mask: a kept turn's raw text is masked when a prompt renders it from H.
    """
    visible = set(state.get("mra_visible_ids") or [])
    current = list(state.get("critical_memories") or [])
    have = {m["id"] for m in current}
    kept, ignored = [], []
    for ident in keep:
        tid = turn_of(ident, g.turns)
        if tid is None or tid not in visible or tid not in g.turns:
            ignored.append(ident)
            continue
        if tid not in have:
            turn = g.turns[tid]
            current.append({"id": tid, "text": f"{turn.speaker}: {turn.full_text}", "round": rnd,
                            "why": reason or f"kept by the model in round {rnd}"})
            have.add(tid)
            kept.append(tid)
    pruned_ids = {turn_of(p, g.turns) for p in prune} - {None}
    pruned = [m["id"] for m in current if m["id"] in pruned_ids]
    current = [m for m in current if m["id"] not in pruned_ids]
    info: dict[str, Any] = {"kept": kept, "pruned": pruned, "keep_ignored": ignored}
    if ignored:
        info["keep_ignored_why"] = "not shown yet or not a turn/event id"
    return current, info


def route(state: MRAgentState, runtime: Runtime[MRAgentContext]) -> dict[str, Any]:
    ctx = runtime.context
    rnd = state.get("iteration", 0)
    parsed = parse_reply(state.get("mra_raw_reply"))
    update: dict[str, Any] = {"mra_pending_calls": [], "mra_dropped_calls": []}
    info: dict[str, Any] = {"form": parsed["form"]}
    if parsed["keep"] or parsed["prune"]:
        crit, keep_info = _apply_keep(state, _graph(ctx, state["namespace"]), parsed["keep"], parsed["prune"],
                                      parsed["reason"], rnd)
        update["critical_memories"] = crit
        info.update(keep_info)
    if parsed["calls"]:
        previous = {call_key(e["tool"], e.get("args")): e["round"] for e in state.get("mra_tool_log") or []}
        left_total = max(0, ctx.mra_max_calls_total - state.get("mra_calls_total", 0))
        cap = min(ctx.mra_max_calls_per_round, left_total)
        pending: list[dict[str, Any]] = []
        dropped: list[dict[str, Any]] = []
        for i, c in enumerate(parsed["calls"], start=1):
            key = call_key(c["tool"], c["args"])
            if key in previous:
                dropped.append({**c, "reason": f"already called in round {previous[key]}; not run again",
                                "repeat": True})
                continue
            if len(pending) >= cap:
                why = (f"over the per-round cap of {ctx.mra_max_calls_per_round}"
                       if cap == ctx.mra_max_calls_per_round else f"question budget of {ctx.mra_max_calls_total} calls spent")
                dropped.append({**c, "reason": why})
                continue
            previous[key] = rnd
            pending.append({"call_id": f"r{rnd}c{i}", "tool": c["tool"], "args": c["args"]})
        update["mra_pending_calls"] = pending
        update["mra_dropped_calls"] = dropped
        info.update(calls=[call_text(p) for p in pending], dropped=[f"{call_text(d)}: {d['reason']}" for d in dropped])

    if parsed["answer"] is not None and not update["mra_pending_calls"]:
        ans = parsed["answer"]
        update.update(draft_answer=ans["answer"].strip(), supports=ans["supports"], mra_confidence=ans["confidence"])
        edge = "answer"
    elif update["mra_pending_calls"]:
        edge = "tools"
    elif rnd >= ctx.mra_max_rounds - 1:
        update["mra_forced_final"] = True
        edge = "answer (forced: round budget)"
    elif ctx.mra_stop_on_repeat and parsed["calls"] and all(d.get("repeat") for d in update["mra_dropped_calls"]):
        # nothing ran, so the next prompt would hold what this one held and bring the same calls back
        update["mra_forced_final"] = True
        edge = "answer (forced: every call repeated an earlier one)"
    else:
        edge = "navigate"
        if not parsed["calls"]:
            info["unusable"] = "no tool call and no answer in the reply"
    update["trace"] = emit("route", round=rnd, edge=edge, **info)
    return update


def after_route(state: MRAgentState) -> Literal["answer", "tools", "navigate"]:
    if state.get("draft_answer"):
        return "answer"
    if state.get("mra_pending_calls"):
        return "tools"
    if state.get("mra_forced_final"):
        return "answer"
    return "navigate"


def tools(state: MRAgentState, runtime: Runtime[MRAgentContext]) -> dict[str, Any]:
    """Run the pending calls. Nothing is masked here: the next prompt masks what it renders."""
    ctx = runtime.context
    g = _graph(ctx, state["namespace"])
    rnd = state.get("iteration", 0)
    tc = ToolContext(graph=g, question=state["question"], masks=set(state.get("masks") or []),
                     seen_cues=set(state.get("mra_seen_cues") or []), cfg=ctx)
    log, cues, calls = [], [], []
    for call in state.get("mra_pending_calls") or []:
        try:
            res = execute(call["tool"], call["args"], tc)
        except Exception as exc:  # a tool bug must not end the run; the model sees the error
            res = error_result(f"{call['tool']} failed: {type(exc).__name__}: {exc}")
        log.append({"round": rnd, "call_id": call["call_id"], "tool": call["tool"], "args": call["args"],
                    "result_ids": res.result_ids, "text": res.text, "error": res.error,
                    "parts": [[line, tid] for line, tid in res.parts], "shown": res.shown_turns,
                    "visible_ids": res.visible_ids})
        cues += res.cues
        calls.append({"call": call_text(call), "error": res.error, "returned": res.shown_turns,
                      "already_shown": res.already_shown, "ids": res.result_ids[:20]})
    total = state.get("mra_calls_total", 0) + len(log)
    forced = rnd >= ctx.mra_max_rounds - 1 or total >= ctx.mra_max_calls_total
    why = None
    if forced:
        why = "round budget" if rnd >= ctx.mra_max_rounds - 1 else f"call budget ({total}/{ctx.mra_max_calls_total})"
    return {
        "mra_tool_log": log,
        "mra_seen_cues": cues,
        "mra_calls_total": total,
        "mra_pending_calls": [],
        "mra_forced_final": forced,
        # the turns the calls returned; the next prompt shows what fits (`shown_turn_ids` there)
        "retrieved_turn_ids": [t for entry in log for t in entry["shown"]],
        "trace": emit("tools", round=rnd, executed=len(log), calls_total=total, results=calls,
                      next="answer (forced: " + why + ")" if why else "navigate"),
    }


def after_tools(state: MRAgentState) -> Literal["answer", "navigate"]:
    return "answer" if state.get("mra_forced_final") else "navigate"


def recursion_limit(ctx: MRAgentContext) -> int:
    return 4 * ctx.mra_max_rounds + 10


# --------------------------------------------------------------------------------------------- graph

builder = StateGraph(MRAgentState, context_schema=MRAgentContext, input_schema=InputState, output_schema=OutputState)
builder.add_node("extract_cues", extract_cues)
builder.add_node("seed", seed)
builder.add_node("navigate", navigate)
builder.add_node("route", route)
builder.add_node("tools", tools)
builder.add_node("answer", answer)
builder.add_edge("extract_cues", "seed")
builder.add_conditional_edges("seed", after_seed, ["navigate", "answer"])
builder.add_edge("navigate", "route")
builder.add_conditional_edges("route", after_route, ["answer", "tools", "navigate"])
builder.add_conditional_edges("tools", after_tools, ["answer", "navigate"])
wire_question_lifecycle(builder, "extract_cues", "answer", "mragent")

graph = builder.compile()
graph.name = "mragent"
