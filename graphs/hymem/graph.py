"""HyMem: dual-granular memory with light / deep / reflect scheduling (specs/methods/hymem.md).

START → light ─┬─ answered (finished 0)            → reflect
               └─ insufficient or invalid output    → deep → reflect
reflect ─┬─ satisfied, unusable rewrite, last round → answer → END
         └─ not satisfied with a new query          → light (next round)

`light` answers from the top `hymem_light_k` Level-1 summaries (1 call). `deep` lets the LLM pick
summaries from the top `hymem_deep_n` (one selection call per batch, batches concurrent) and answers
from the linked Level-2 sessions (1 call). `reflect` judges the draft and may rewrite the retrieval
query (1 call, skipped on the last round). `answer` is deterministic. Retrievers (the cosine
search and the deep selection call, Algorithm 1 line 10) see the current query q_i; generators
always see the original question q0 plus the previous answer (memory pool).

An answer is only ever text a model wrote as its answer: an empty, "no information" or JSON-only
reply never becomes the draft, and never replaces a real answer from an earlier round.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from langchain_core.runnables.config import ContextThreadPoolExecutor
from langgraph.graph import StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, BeforeValidator, Field, field_validator

from recollect.dialogue.turn_ids import TurnIdMatcher, id_items
from recollect.graphs.hymem.memory import load_sessions, summary_index
from recollect.graphs.hymem.settings import HyMemContext
from recollect.graphs.hymem.state import HyMemState
from recollect.llm.lenient import Text, as_int_or_raw
from recollect.llm.models import get_chat_model
from recollect.llm.structured import StructuredResult, call_structured
from recollect.llm.usage import estimate_tokens, merge_usage
from recollect.memory.vectors import Unit
from recollect.prompts import load_prompt, render_prompt
from recollect.state import InputState, OutputState
from recollect.steps import (
    NO_INFO,
    clean_answer,
    critical_from_turns,
    grounded_in,
    is_no_info,
    messages,
    wire_question_lifecycle,
    workspace,
)
from recollect.trace import emit

MAX_TOKENS = 512
_EMPTY_STORE = "no HyMem summaries in this namespace (ingest it with the hymem builder)"


# --- reply schemas (lenient coercions live in validators) ---------------------------------------


def _int_list(v: Any) -> Any:
    """Integers from a list, a single value or a comma-separated string; anything else is dropped."""
    if v is None or (isinstance(v, str) and v.strip().lower() in ("", "none", "null")):
        return []
    if isinstance(v, str):
        v = v.replace(";", ",").split(",")
    if isinstance(v, int):
        v = [v]
    if not isinstance(v, list | tuple):
        return []
    out = []
    for x in v:
        x = as_int_or_raw(x.strip() if isinstance(x, str) else x)
        if isinstance(x, int) and not isinstance(x, bool):
            out.append(x)
    return out


IntList = Annotated[list[int], BeforeValidator(_int_list)]


class LightReply(BaseModel):
    """`finished`: 0 = answered, 2 = insufficient ("0"/"2" strings accepted); `used`: the summary ids
    the answer rests on (our addition, for selective supports; range-checked in `light`)."""

    finished: Annotated[Literal[0, 2], BeforeValidator(as_int_or_raw)]
    answer: Text = ""
    used: IntList = Field(default_factory=list)


class SelectReply(BaseModel):
    """Indices into one batch. Non-integers are dropped here; range and duplicates in `deep`."""

    selected: IntList = Field(default_factory=list)


class DeepReply(BaseModel):
    answer: Text
    supports: list[str] = Field(default_factory=list)

    @field_validator("answer")
    @classmethod
    def _real_answer(cls, v: str) -> str:
        if not clean_answer(v):
            raise ValueError("answer is empty (or only JSON): write the answer text")
        return clean_answer(v)

    @field_validator("supports", mode="before")
    @classmethod
    def _ids(cls, v: Any) -> Any:
        return id_items(v)  # matched against the shown turns in `deep`


class ReflectReply(BaseModel):
    """`finished`: 1 = satisfied, 0 = not (then `new_question` is the rewritten query)."""

    finished: Annotated[Literal[0, 1], BeforeValidator(as_int_or_raw)]
    new_question: Text = ""


# --- helpers ------------------------------------------------------------------------------------


def _top_summaries(ctx: HyMemContext, namespace: str, query: str, n: int) -> list[Unit]:
    """The top-n Level-1 summaries by cosine to `query`; ties keep corpus order.

    Over-fetching first makes the cut deterministic: the vector store breaks ties at its n-th
    result arbitrarily, and scores are rounded so float32 noise does not reorder equal texts.
    """
    if n <= 0:
        return []
    index = summary_index(workspace(ctx), namespace)
    units = index.query(query, n + max(n, 10))
    return sorted(units, key=lambda u: (-round(u.score, 5), u.metadata.get("order", 0)))[:n]


def _line(u: Unit) -> str:
    return f"time: {u.metadata.get('date', 'unknown date')}, {u.text}"


def _numbered(i: int, u: Unit) -> str:
    return f"id: {i}, {_line(u)}"


def _style(ctx: HyMemContext, module: str) -> str:
    """The answer-form instruction for `light` or `deep` (hymem_answer_style)."""
    return load_prompt("hymem", f"style_{module}_{ctx.hymem_answer_style}")


_WORD = re.compile(r"[a-z0-9]+")


def _light_supports(ctx: HyMemContext, kept: list[Unit], used: list[int], answer: str) -> tuple[list[str], str]:
    """Turns behind a light answer, and where they came from (hymem_light_supports)."""
    if ctx.hymem_light_supports == "all_shown":
        return _turns_of(kept), "all shown summaries"
    cited = [kept[i] for i in dict.fromkeys(used) if 0 <= i < len(kept)]
    if cited:
        return _turns_of(cited), "summaries the light call cited"
    # No usable citation: the summaries sharing the most words with the answer, if any share one.
    words = {w for w in _WORD.findall(answer.lower()) if len(w) >= 3}
    overlap = [len(words & set(_WORD.findall(u.text.lower()))) for u in kept]
    best = max(overlap, default=0)
    if best > 0:
        return _turns_of([u for u, n in zip(kept, overlap, strict=True) if n == best]), "summaries sharing the answer's words"
    return _turns_of(kept), "all shown summaries (no citation, no overlap)"


def _in_turns(ctx: HyMemContext, namespace: str, answer: str, turn_ids: list[str]) -> bool:
    """The answer's content words are in these turns' text or date (hymem_light_grounding)."""
    turns = workspace(ctx).turns(namespace)
    sources = [f"{t.date_time} {t.full_text}" for tid in turn_ids if (t := turns.get(tid)) is not None]
    return grounded_in(answer, sources)


def _pool_line(draft: str | None) -> list[str]:
    return [f"previous answer: {draft}"] if draft else []


def _turns_of(units: list[Unit]) -> list[str]:
    return list(dict.fromkeys(t for u in units for t in u.turn_ids))


def _round(state: HyMemState) -> int:
    return int(state.get("iteration") or 0)


def _call(ctx: HyMemContext, name: str, schema: type[BaseModel], node: str, **values: Any) -> StructuredResult[Any]:
    user = render_prompt("hymem", name, **values)
    return call_structured(get_chat_model(ctx), messages(None, user), schema, node=node,
                           method=ctx.structured_method, max_tokens=MAX_TOKENS)


# --- nodes --------------------------------------------------------------------------------------


def light(state: HyMemState, runtime: Runtime[HyMemContext]) -> dict[str, Any]:
    ctx = runtime.context
    ns = state["namespace"]
    workspace(ctx).require_namespace(ns)
    question = state["question"]
    query = state.get("query") or question
    rnd = _round(state)
    units = _top_summaries(ctx, ns, query, ctx.hymem_light_k)
    base: dict[str, Any] = {"query": query, "iteration": rnd}
    if not units:
        return {**base, "hymem_light_ids": [], "evidence": [], "hymem_route": "deep",
                "trace": emit("light", round=rnd, query=query, decision="deep", why=_EMPTY_STORE, calls=0)}

    # The memory pool (previous answer) joins from round 2 on; drafts only exist after round 1.
    pool = _pool_line(state.get("draft_answer")) if rnd > 0 else []
    # Budget in code: drop the lowest-ranked summaries only if the prompt would overflow.
    fixed = estimate_tokens(load_prompt("hymem", "light") + question + "".join(pool)) + MAX_TOKENS
    kept: list[Unit] = []
    used = fixed
    for u in units:
        cost = estimate_tokens(_line(u))
        if kept and used + cost > ctx.max_prompt_tokens:
            break
        kept.append(u)
        used += cost
    lines = [_numbered(i, u) for i, u in enumerate(kept)] + pool
    shown = _turns_of(kept)
    res = _call(ctx, "light", LightReply, "light", question=question, context="\n".join(lines),
                style=_style(ctx, "light"))
    reply = res.value
    text = clean_answer(reply.answer) if reply is not None else ""
    answered = reply is not None and reply.finished == 0 and not is_no_info(text)
    if reply is None:
        why = "light output invalid after a retry: escalate to deep"
    elif answered:
        why = "light judged the summaries sufficient"
    elif reply.finished == 0:
        why = "light said finished=0 without a real answer (empty, no information or JSON): treated as insufficient"
    else:
        why = "light judged the summaries insufficient (finished=2)"
    update: dict[str, Any] = {
        **base,
        "hymem_light_ids": [u.id for u in kept],
        "evidence": lines,
        "hymem_route": "reflect" if answered else "deep",
        "usage": res.usage,
    }
    supports_from = None
    ungrounded = None
    if answered:
        assert reply is not None
        supports, supports_from = _light_supports(ctx, kept, reply.used, text)
        if ctx.hymem_light_grounding and not _in_turns(ctx, ns, text, supports):
            ungrounded, answered = text, False
            why = "light answer not found in the turns its summaries link to: escalate to deep"
            update["hymem_route"] = "deep"
        else:
            update.update(draft_answer=text, hymem_status="light", supports=supports)
    update["trace"] = emit(
        "light", round=rnd, query=query, question=question, summary_ids=[u.id for u in kept],
        dropped_for_budget=[u.id for u in units[len(kept):]], finished=reply.finished if reply else None,
        answer=text if answered else None, used=reply.used if reply else None, decision=update["hymem_route"],
        why=why, supports=update.get("supports"), supports_from=supports_from, ungrounded_answer=ungrounded,
        shown_turn_ids=shown, **(res.failure_note() if reply is None else {}),
    )
    return update


def _select_batch(ctx: HyMemContext, query: str, batch: list[Unit]) -> tuple[list[int], dict[str, Any], dict[str, Any]]:
    """One selection call for the current query q_i; returns (valid indices, usage, note for the trace)."""
    lines = "\n".join(_numbered(i, u) for i, u in enumerate(batch))
    res = _call(ctx, "deep_select", SelectReply, "deep_select", question=query, lines=lines)
    raw = res.value.selected if res.value else []
    picked = list(dict.fromkeys(i for i in raw if 0 <= i < len(batch)))
    note: dict[str, Any] = {"size": len(batch), "model_selected": raw}
    if not picked:
        picked = list(range(min(ctx.hymem_deep_fallback_k, len(batch))))
        note["fallback"] = "invalid selection" if res.value is None else "empty selection after dropping bad indices"
        note["fallback_top"] = len(picked)
        if res.value is None:
            note.update(res.failure_note())
    elif len(picked) != len(raw):
        note["dropped"] = [i for i in raw if i not in picked or raw.count(i) > 1]
    return picked, res.usage, note


def _session_lines(doc: dict[str, Any], budget: int) -> tuple[list[str], list[str]]:
    """A session's lines (header + turns) and turn ids, cut at `budget` tokens if needed."""
    lines = doc["text"].split("\n")
    header, turn_lines = lines[0], lines[1:]
    ids = list(doc.get("turn_ids") or [])
    kept, used = [header], estimate_tokens(header)
    for line in turn_lines:
        cost = estimate_tokens(line)
        if len(kept) > 1 and used + cost > budget:
            break
        kept.append(line)
        used += cost
    return kept, ids[: len(kept) - 1]


def deep(state: HyMemState, runtime: Runtime[HyMemContext]) -> dict[str, Any]:
    ctx = runtime.context
    ns = state["namespace"]
    question = state["question"]
    query = state.get("query") or question
    rnd = _round(state)
    draft = state.get("draft_answer") or ""
    candidates = _top_summaries(ctx, ns, query, ctx.hymem_deep_n)
    if not candidates:
        return {"hymem_deep_candidates": [], "hymem_selected_ids": [],
                "trace": emit("deep", round=rnd, query=query, calls=0, why=_EMPTY_STORE + "; draft kept")}

    size = max(1, ctx.hymem_deep_batch)
    batches = [candidates[i : i + size] for i in range(0, len(candidates), size)]
    if ctx.hymem_parallel_batches and len(batches) > 1:
        # HyMemContext-copying pool: LangChain callbacks and the run config follow into the threads.
        with ContextThreadPoolExecutor(max_workers=min(len(batches), 8)) as pool:
            results = list(pool.map(lambda b: _select_batch(ctx, query, b), batches))
    else:
        results = [_select_batch(ctx, query, b) for b in batches]
    usage: dict[str, Any] = {}
    selected: list[Unit] = []
    notes = []
    for batch, (picked, u, note) in zip(batches, results, strict=True):
        usage = merge_usage(usage, u)
        selected.extend(batch[i] for i in picked)
        notes.append(note)
    selected = list({u.id: u for u in selected}.values())

    sessions = load_sessions(workspace(ctx), ns)
    masks = set(state.get("masks") or [])

    def fresh(units: list[Unit]) -> list[str]:
        out: list[str] = []
        for u in units:
            sid = u.metadata.get("session")
            doc = sessions.get(sid) if sid else None
            if doc is None or sid in out:
                continue
            if set(doc.get("turn_ids") or []) <= masks:
                continue  # every turn was shown in an earlier round; its content lives in the pool
            out.append(sid)
        return out

    chosen = fresh(selected)
    session_source = "selected"
    if not chosen:
        chosen, session_source = fresh(candidates), "highest-ranked unmasked candidates"
    skipped_masked = [u.metadata.get("session") for u in selected
                      if u.metadata.get("session") in sessions
                      and set(sessions[u.metadata["session"]].get("turn_ids") or []) <= masks]
    base = {
        "hymem_deep_candidates": [u.id for u in candidates],
        "hymem_selected_ids": [u.id for u in selected],
        "usage": usage,
    }
    if not chosen:
        return {**base, "trace": emit(
            "deep", round=rnd, query=query, candidates=len(candidates), batches=notes,
            selected_ids=[u.id for u in selected], skipped_masked_sessions=list(dict.fromkeys(skipped_masked)),
            calls=len(batches), why="every candidate session was already shown; deep answer skipped, draft kept",
        )}

    # Session cap, then the prompt budget (whole sessions in selection order; the first may be cut).
    pool = _pool_line(draft)
    budget = ctx.max_prompt_tokens - estimate_tokens(load_prompt("hymem", "deep_answer") + question
                                                     + "".join(pool)) - MAX_TOKENS
    lines: list[str] = []
    shown_sessions: list[str] = []
    shown_turns: list[str] = []
    dropped: list[str] = []
    truncated: list[str] = []
    for sid in chosen[: max(1, ctx.hymem_deep_max_sessions)]:
        doc = sessions[sid]
        cost = estimate_tokens(doc["text"])
        if shown_sessions and cost > budget:
            dropped.append(sid)
            continue
        s_lines, s_ids = _session_lines(doc, budget) if cost > budget else (doc["text"].split("\n"), doc["turn_ids"])
        if cost > budget:
            truncated.append(sid)
        lines.extend(s_lines)
        shown_sessions.append(sid)
        shown_turns.extend(s_ids)
        budget -= estimate_tokens("\n".join(s_lines))
    dropped += chosen[max(1, ctx.hymem_deep_max_sessions):]
    context = lines + pool

    res = _call(ctx, "deep_answer", DeepReply, "deep_answer", question=question, context="\n".join(context),
                style=_style(ctx, "deep"))
    usage = merge_usage(usage, res.usage)
    reply = res.value
    shown_set = set(shown_turns)
    matcher = TurnIdMatcher(shown_turns)
    # The model's answer: the validated reply, else its raw text unless that is empty or only JSON.
    written = reply.answer if reply is not None else clean_answer(res.raw)
    pool_answer = clean_answer(draft)
    note: dict[str, Any] = {} if reply is not None else res.failure_note()
    if not is_no_info(written):
        text, note["answer_from"] = written, "deep answer" if reply is not None else "raw reply"
    elif pool_answer and not is_no_info(pool_answer):
        text, note["answer_from"] = pool_answer, "memory pool (the deep reply had no answer)"
    else:
        text, note["answer_from"] = NO_INFO, "no info"
    cited = matcher.resolve(reply.supports) if reply is not None else []
    cited = cited or (matcher.find(written) if text == written else [])
    linked = [t for t in _turns_of(selected) if t in shown_set] or [t for t in _turns_of(candidates) if t in shown_set]
    supports = cited or linked
    kept_pool = text == pool_answer and text != written
    update: dict[str, Any] = {
        **base,
        "usage": usage,
        "hymem_sessions_shown": shown_sessions,
        "masks": shown_turns,
        "evidence": context,
    }
    if not kept_pool:  # a kept earlier answer keeps its own status and supports
        update.update(draft_answer=text, hymem_status="deep", supports=supports)
    return {
        **update,
        "trace": emit(
            "deep", round=rnd, query=query, question=question, candidates=len(candidates),
            batches=notes, selected_ids=[u.id for u in selected], session_source=session_source,
            skipped_masked_sessions=list(dict.fromkeys(skipped_masked)), sessions_shown=shown_sessions,
            sessions_dropped=dropped, sessions_truncated=truncated, answer=text,
            supports=None if kept_pool else supports,
            supports_from=None if kept_pool else ("cited by the answer" if cited else "linked from summaries"),
            shown_turn_ids=shown_turns, **note,
        ),
    }


def reflect(state: HyMemState, runtime: Runtime[HyMemContext]) -> dict[str, Any]:
    ctx = runtime.context
    rnd = _round(state)
    query = state.get("query") or state["question"]
    draft = state.get("draft_answer") or ""
    if rnd + 1 >= ctx.hymem_max_rounds:
        return {"hymem_next": "answer", "trace": emit("reflect", round=rnd, next="answer", calls=0,
                              why=f"no rounds left (max_rounds={ctx.hymem_max_rounds}); no reflect call")}
    if not draft:
        return {"hymem_next": "answer", "trace": emit("reflect", round=rnd, next="answer", calls=0,
                              why="nothing to judge: no draft answer (empty memory); no reflect call")}
    res = _call(ctx, "reflect", ReflectReply, "reflect", question=state["question"], answer=draft)
    reply = res.value
    go_on = False
    if reply is None:
        satisfied, new_q, why = True, "", "reflect output invalid: treated as satisfied, answer kept"
    else:
        satisfied, new_q = reply.finished == 1, reply.new_question
        if satisfied:
            why = "reflect satisfied"
        elif not new_q:
            why = "not satisfied but no new question: stop"
        elif " ".join(new_q.lower().split()) == " ".join(query.lower().split()):
            why = "not satisfied but the new question equals the current query: stop"
        else:
            go_on, why = True, "not satisfied: next round with the rewritten query"
    update: dict[str, Any] = {
        "usage": res.usage,
        "hymem_next": "light" if go_on else "answer",
        "hymem_reflections": [{"round": rnd, "satisfied": satisfied, "new_question": new_q or None}],
        "trace": emit("reflect", round=rnd, satisfied=satisfied, new_question=new_q or None,
                      next="light" if go_on else "answer", why=why,
                      **(res.failure_note() if reply is None else {})),
    }
    if go_on:
        update.update(query=new_q, iteration=rnd + 1)
    return update


def answer(state: HyMemState, runtime: Runtime[HyMemContext]) -> dict[str, Any]:
    ctx = runtime.context
    draft = clean_answer(state.get("draft_answer"))
    draft = "" if is_no_info(draft) else draft
    text = draft or NO_INFO
    shown: set[str] = {t for r in state.get("trace") or [] for t in r.get("shown_turn_ids") or ()}
    supports = [t for t in state.get("supports") or [] if t in shown] if draft else []
    status = state.get("hymem_status")
    if not draft:
        why = "no module produced an answer (empty store or nothing retrievable)"
    elif status == "light":
        why = "the light module answered from Level-1 summaries"
    else:
        lights = [r for r in state.get("trace") or [] if r.get("node") == "light"]
        why = "the deep module answered from Level-2 sessions after: " + (lights[-1].get("why") if lights else "?")
    return {
        "answer": text,
        "supports": supports,
        "critical_memories": critical_from_turns(ctx, state["namespace"], supports),
        "trace": emit("answer", answered_by=status if draft else None, why=why, rounds=_round(state) + 1,
                      answer=text, supports=supports, calls=0),
    }


# --- routing ------------------------------------------------------------------------------------


def route_after_light(state: HyMemState) -> Literal["deep", "reflect"]:
    return "reflect" if state.get("hymem_route") == "reflect" else "deep"


def route_after_reflect(state: HyMemState) -> Literal["light", "answer"]:
    return "light" if state.get("hymem_next") == "light" else "answer"


builder = StateGraph(HyMemState, context_schema=HyMemContext, input_schema=InputState, output_schema=OutputState)
builder.add_node("light", light)
builder.add_node("deep", deep)
builder.add_node("reflect", reflect)
builder.add_node("answer", answer)
builder.add_conditional_edges("light", route_after_light, ["deep", "reflect"])
builder.add_edge("deep", "reflect")
builder.add_conditional_edges("reflect", route_after_reflect, ["light", "answer"])
wire_question_lifecycle(builder, "light", "answer")

graph = builder.compile()
graph.name = "hymem"


def recursion_limit(ctx: HyMemContext) -> int:
    """LangGraph steps a run may take with these settings (rounds times the nodes of a round, plus the rest)."""
    return 6 * ctx.hymem_max_rounds + 10
