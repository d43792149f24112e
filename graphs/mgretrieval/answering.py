"""The main model's nodes: `assess` (p_r2, one call per round), `final_answer` (our addition,
`mg_final_answer_tokens`) and the final `rewrite` (p_r3) (README.md in this folder, "The graph" and "What this
implementation changes, and why").

`assess` sees exactly (q, a(r-1), H(r-1), R̃(r)) (eq. 12) and replaces H with the shown memories the
reply names (eq. 13); ids it invents are dropped. `rewrite` turns the draft into a short span with
the shared `recollect.answer_rewrite`. `final_answer` writes the answer as rag does from the turns the rounds
showed and brought in (`recollect.turn_answer`); the rewrite then runs only when it gave no answer.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, field_validator

from recollect.answer_rewrite import memory_line, memory_lines, rewrite_answer
from recollect.dialogue.turn_ids import TurnIdMatcher, id_items
from recollect.graphs.mgretrieval.settings import MGRetrievalContext
from recollect.graphs.mgretrieval.state import MGRetrievalState, RoundEntry
from recollect.graphs.mgretrieval.turns import memory_item, session_dates
from recollect.graphs.mgretrieval.vocabulary import METHOD
from recollect.llm.lenient import Text
from recollect.llm.models import get_chat_model
from recollect.llm.structured import call_structured
from recollect.memory.turn_ranking import top_by_similarity
from recollect.memory.workspace import Workspace
from recollect.prompts import render_prompt
from recollect.steps import NO_INFO, grounded_in, grounded_supports, is_no_info, messages, workspace
from recollect.trace import emit
from recollect.turn_continue import exchange_of, final_turn_answer


class AssessReply(BaseModel):
    """p_r2: the answer a(r), the sufficiency flag b(r) and the critical memory ids H(r)."""

    answer: Text = ""
    sufficient: bool = False
    critical_ids: list[str] = Field(default_factory=list)

    @field_validator("sufficient", mode="before")
    @classmethod
    def _flag(cls, v: Any) -> Any:
        if isinstance(v, str):
            s = v.strip().lower()
            if s in ("true", "yes", "1", "sufficient"):
                return True
            if s in ("false", "no", "0", "insufficient", ""):
                return False
        return v

    @field_validator("critical_ids", mode="before")
    @classmethod
    def _ids(cls, v: Any) -> Any:
        # "D1:2, D3:4", "[D1:2]" or a list → candidate ids of any shape; `assess` keeps the shown ones.
        return id_items(v)


def _union(held: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """H(r-1) ∪ R̃(r), H first, each memory once."""
    ids = {m["id"] for m in held}
    return [*held, *[m for m in new if m["id"] not in ids]]


def _critical_fallback(ws: Workspace, ns: str, question: str, pool: list[dict[str, Any]],
                       n: int) -> list[dict[str, Any]]:
    """The n memories of `pool` most similar to the question, in pool order."""
    ids = top_by_similarity(ws, ns, question, [m["id"] for m in pool], n)
    keep = set(ids)
    return [m for m in pool if m["id"] in keep]


def assess(state: MGRetrievalState, runtime: Runtime[MGRetrievalContext]) -> dict[str, Any]:
    ctx = runtime.context
    ws = workspace(ctx)
    ns = state["namespace"]
    question = state["question"]
    previous = state.get("draft_answer") or ""
    held = list(state.get("critical_memories") or [])
    new = list(state.get("mg_new_memories") or [])
    rnd = state.get("iteration", 0) + 1

    # I(r) = (q, a(r-1), H(r-1), R̃(r)) and nothing else from earlier rounds (eq. 12).
    user = render_prompt(METHOD, "assess", question=question, previous_answer=previous or "(none yet)",
                         critical=memory_lines(held), new=memory_lines(new), max_critical=ctx.mg_max_critical)
    model = get_chat_model(ctx, role="main")
    msgs = messages(None, user)
    res = call_structured(model, msgs, AssessReply, node="assess", method=ctx.structured_method, max_tokens=200)

    pool = {m["id"]: m for m in [*held, *new]}
    cap = max(1, ctx.mg_max_critical)
    note: dict[str, Any] = {}
    dropped: list[str] = []
    claimed = False
    if res.value is not None:
        reply = res.value
        answer = reply.answer.strip() or previous
        claimed = sufficient = bool(reply.sufficient)
        ids: list[str] = []
        matcher = TurnIdMatcher(pool)  # the ids shown in this prompt, whatever their shape
        for cid in reply.critical_ids:
            named = matcher.resolve([cid])
            if not named:
                dropped.append(cid)  # never let the model invent or resurrect an id
            ids.extend(t for t in named if t not in ids)
        critical = [pool[i] for i in ids[:cap]]  # H(r) replaces H(r-1) (eq. 13)
        if not critical and reply.answer.strip():
            # Our addition: an answer that names no critical memory keeps the shown memories that
            # contain it, so H (and therefore supports) is not silently empty.
            containing = grounded_supports(ctx, ns, reply.answer, list(pool), limit=cap)
            critical = [pool[i] for i in containing]
            if critical:
                note = {"critical_from": "memories containing the answer (the reply listed none)"}
        if not critical and ctx.mg_keep_critical_when_none:
            # Our addition (false = the spec's literal eq. 13, an empty H): a reply that names no shown
            # memory keeps H(r-1) ∪ R̃(r) cut by similarity, as the malformed-reply fallback does, so
            # the next round and the rewrite still see the memories found so far.
            critical = _critical_fallback(ws, ns, question, _union(held, new), cap)
            if critical:
                note = {"critical_from": "H(r-1) ∪ R̃(r) by similarity (the reply named no shown memory)"}
    else:
        answer, sufficient = previous, False
        critical = _critical_fallback(ws, ns, question, _union(held, new), cap)
        note = {**res.failure_note(), "fallback_rule": "keep a(r-1); H(r) = H(r-1) ∪ R̃(r) cut by similarity"}
    grounded: bool | None = None
    if claimed and ctx.mg_assess_grounding:
        # Our addition (false = the spec): the model's "sufficient" is accepted only when the answer is
        # in the memories it was shown (their text and date); a "no information" answer never is.
        shown_texts = [f"{m.get('date', '')} {m['text']}" for m in pool.values()]
        grounded = not is_no_info(answer) and grounded_in(answer, shown_texts)
        sufficient = grounded
        if not grounded:
            note["why_not_sufficient"] = (
                "a 'no information' answer is never sufficient" if is_no_info(answer)
                else "the answer is not found in the memories shown")
    iteration = state.get("iteration", 0) + 1
    stop = "sufficient" if sufficient else ("round limit" if iteration >= ctx.mg_max_rounds else "continue")
    shown = [*[m["id"] for m in held], *[m["id"] for m in new]]  # H(r-1) ∪ R̃(r): this prompt's memories
    return {
        "draft_answer": answer,
        "mg_sufficient": sufficient,
        "critical_memories": critical,
        "evidence": [memory_line(m) for m in critical],
        "supports": [m["id"] for m in critical],
        "iteration": iteration,
        "usage": res.usage,
        "shown_turn_ids": shown,
        # kept only for a continued final call; a reply that took its retry answered a longer chat: not continued
        "mg_exchange": exchange_of(msgs, res.raw) if ctx.mg_final_answer_tokens and ctx.mg_final_answer_continues
        and res.value is not None and res.attempts == 1 else None,
        "mg_round_log": [RoundEntry(node="assess", round=rnd, grounded=grounded)],
        "trace": emit(
            "assess", llm_role="main", round=rnd, answer=answer, sufficient=sufficient,
            claimed_sufficient=claimed, grounded=grounded, decision=stop,
            kept_ids=[m["id"] for m in critical], dropped_ids=dropped,
            shown_turn_ids=shown, **note,
        ),
    }


def rewrite(state: MGRetrievalState, runtime: Runtime[MGRetrievalContext]) -> dict[str, Any]:
    ctx = runtime.context
    draft = (state.get("draft_answer") or "").strip()
    critical = list(state.get("critical_memories") or [])
    supports = [m["id"] for m in critical]
    if not draft and not critical:
        return {"answer": NO_INFO, "supports": [], "critical_memories": [],
                "trace": emit("rewrite", llm_role="main", calls=0, answer=NO_INFO,
                              note="nothing was retrieved or answered: no rewrite call")}
    res = rewrite_answer(ctx, state["question"], draft, critical, with_question=ctx.mg_rewrite_with_question,
                         keep_draft=ctx.mg_rewrite_keep_draft)
    answer, note = res.answer, res.note
    return {
        "answer": answer,
        "answer_before_rewrite": draft,  # the eval scores the draft too, to show what the rewrite did
        "supports": supports,
        "critical_memories": critical,
        "usage": res.usage,
        "shown_turn_ids": supports,  # the rewrite prompt shows the critical memories
        "trace": emit("rewrite", llm_role="main", draft=draft, answer=answer, supports=supports,
                      shown_turn_ids=supports, **note),
    }


def final_answer(state: MGRetrievalState, runtime: Runtime[MGRetrievalContext]) -> dict[str, Any]:
    """Our addition (`mg_final_answer_tokens`; the graph skips this node at 0, the spec): the answer written as
    rag writes it from the turns the rounds showed and those their keyword groups brought in, the kept
    memories first; continuing the last assess exchange (`mg_final_answer_continues`) or in rag's own prompt.
    No usable reply leaves the answer to the rewrite (the route after this node)."""
    ctx = runtime.context
    ns = state["namespace"]
    draft = (state.get("draft_answer") or "").strip()
    kept = [m["id"] for m in state.get("critical_memories") or []]
    chosen = [*(state.get("shown_turn_ids") or []), *(state.get("retrieved_turn_ids") or [])]
    # issue 34: with mg_final_answer_continues the last assess exchange is continued, so a prompt cache serves it
    sent = state.get("mg_exchange") if ctx.mg_final_answer_continues else None
    final = final_turn_answer(ctx, ns, state["question"], kept, chosen, ctx.mg_final_answer_tokens, sent,
                              ("final_answer", "mgretrieval_continue"), shown_before=state.get("shown_turn_ids") or [])
    out: dict[str, Any] = {"usage": final.usage, "shown_turn_ids": final.shown}
    note: dict[str, Any] = {"llm_role": "main", "final_draft": draft or None, **final.trace}
    if not final.answer:
        note["fallback"] = "the final answer call gave no answer: the rewrite answers"
        return {**out, "trace": emit("final_answer", answer=None, **note)}
    ws = workspace(ctx)
    turns, dates = ws.turns(ns), session_dates(ws, ns)
    critical = [memory_item(turns[t], dates.get(t, "")) for t in final.supports if t in turns]
    return {
        **out,
        "answer": final.answer,
        "answer_before_rewrite": draft or None,  # the eval scores the draft too, to show what this call did
        "supports": final.supports,
        "critical_memories": critical,
        "trace": emit("final_answer", answer=final.answer, supports=final.supports, **note),
    }
