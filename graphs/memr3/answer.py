"""MemR3's answer call: a short answer from the evidence, the router's draft and (by default) the
turns behind them, with supports among the shown turns (README.md in this folder, "Nodes").

Three settings make the answer rest on what the loop saw rather than only on the router's notes
(each one value away from the spec): `memr3_answer_snippets` shows the answer call the turns,
`memr3_keep_cited_evidence` (in the router) keeps cited evidence the router dropped, and
`memr3_prefer_grounded_draft` keeps a grounded draft over "No information available".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langgraph.runtime import Runtime
from pydantic import ConfigDict

from recollect.answer_rewrite import REWRITE_MEMORIES, rewrite_answer
from recollect.budget import pack
from recollect.dialogue.turn_ids import TurnIdMatcher
from recollect.graphs.memr3.layout import (
    answer_budget_prompt,
    answer_messages,
    continued_answer_budget_text,
    continued_answer_messages,
)
from recollect.graphs.memr3.settings import MemR3Context
from recollect.graphs.memr3.state import MemR3State
from recollect.llm.models import get_chat_model
from recollect.llm.structured import StructuredResult, call_structured
from recollect.llm.usage import estimate_tokens, merge_usage
from recollect.steps import (
    NO_INFO,
    AnswerReply,
    bullets,
    clean_answer,
    critical_from_turns,
    grounded_in,
    grounded_supports,
    is_no_info,
    workspace,
)
from recollect.trace import emit

# memr3_reply_bounds: the answer call's grammar caps. Unbounded, the 1.5B model sometimes listed a dozen supports,
# each a whole turn line, until the call's 120 tokens ran out; a support needs only its turn id.
BOUNDED_ANSWER_CHARS = 150
BOUNDED_SUPPORTS = (6, 16)  # items, characters each ("[D12:34]" and room for a longer foreign id)


class BoundedAnswerReply(AnswerReply):
    """AnswerReply with the length caps of memr3_reply_bounds in its schema (validation does not enforce them)."""

    model_config = ConfigDict(json_schema_extra=lambda schema: _bound_answer(schema))


def _bound_answer(schema: dict[str, Any]) -> None:
    props = schema["properties"]
    props["answer"]["maxLength"] = BOUNDED_ANSWER_CHARS
    props["supports"]["maxItems"], props["supports"]["items"]["maxLength"] = BOUNDED_SUPPORTS


def snippets_for_answer(state: MemR3State, ctx: MemR3Context) -> list[dict[str, Any]]:
    """The snippets the answer call may see: the latest retrieval's, or with `memr3_answer_snippets` = all
    every retrieval's, the latest retrieval first (each in its rank order), each chunk once."""
    if ctx.memr3_answer_snippets != "all":
        return list(state.get("memr3_snippets") or [])
    return each_chunk_once(reversed(state.get("memr3_retrievals") or []), set())


def each_chunk_once(retrievals: Iterable[list[dict[str, Any]]], seen: set[str]) -> list[dict[str, Any]]:
    """The retrievals' snippets in the order given, each chunk once and none of `seen` (which gains them)."""
    out: list[dict[str, Any]] = []
    for retrieval in retrievals:
        for snippet in retrieval:
            if snippet["chunk_id"] not in seen:
                seen.add(snippet["chunk_id"])
                out.append(snippet)
    return out


def answer_turns(state: MemR3State, ctx: MemR3Context, evidence_ids: list[str],
                 budget: int) -> tuple[list[tuple[list[str], str]], int]:
    """(turn ids, text) shown to the answer call: the snippets (`snippets_for_answer`), then the cited turns
    not in them; and how many of them are snippets.

    Both stop at the first one that does not fit `budget`; the best snippet is always shown.
    """
    snippets = pack(snippets_for_answer(state, ctx), budget, lambda s: estimate_tokens(s["text"]),
                    keep_first=True)
    out: list[tuple[list[str], str]] = [(list(s["turn_ids"]), s["text"]) for s in snippets.kept]
    in_snippets = {t for ids, _ in out for t in ids}
    missing = [t for t in evidence_ids if t not in in_snippets]
    # A foreign retriever has no turn store: its turn text survives only in the evidence bullets.
    turns = workspace(ctx).turns(state["namespace"]) if missing and ctx.retriever is None else {}
    lines = [(tid, turn.render()) for tid in missing if (turn := turns.get(tid)) is not None]
    cited = pack(lines, budget, lambda line: estimate_tokens(line[1]), used=snippets.used)
    return out + [([tid], line) for tid, line in cited.kept], len(snippets.kept)


def continued_answer(state: MemR3State, ctx: MemR3Context, exchange: dict[str, Any], shown: list[tuple[list[str], str]],
                     n_snippets: int) -> tuple[list[Any], list[tuple[list[str], str]]]:
    """The continued answer call's messages (memr3_answer_continues) and the turns it sees. `shown` is what the
    answer call's own prompt would show (its first `n_snippets` are snippets, the rest cited turns). The router's
    prompt held the latest retrieval's snippets, so the new message adds, to the prompt budget: with
    memr3_answer_snippets = all, the earlier retrievals' snippets in the order they were made (the first one
    searched with the question alone, so it goes first where the budget cuts), then the cited turns not among
    them, then the evidence carried beside the router's reply."""
    latest = [(list(s["turn_ids"]), s["text"]) for s in state.get("memr3_snippets") or []]
    seen_chunks = {s["chunk_id"] for s in state.get("memr3_snippets") or []}
    earlier: list[tuple[list[str], str]] = []
    if ctx.memr3_answer_snippets == "all":
        earlier = [(list(s["turn_ids"]), s["text"])
                   for s in each_chunk_once((state.get("memr3_retrievals") or [])[:-1], seen_chunks)]
    seen = {t for ids, _ in latest + earlier for t in ids}
    cited = [(ids, text) for ids, text in shown[n_snippets:] if not set(ids) <= seen]
    lines = earlier + cited + [([], note) for note in exchange.get("carried") or []]
    fixed = estimate_tokens(continued_answer_budget_text(exchange, state["question"])) + 150
    kept = pack(lines, ctx.max_prompt_tokens - fixed, lambda line: estimate_tokens(line[1]), keep_first=False).kept
    sent = continued_answer_messages(exchange, state["question"], [text for _, text in kept])
    return sent, latest + [(ids, text) for ids, text in kept if ids]


def answer(state: MemR3State, runtime: Runtime[MemR3Context]) -> dict[str, Any]:
    ctx = runtime.context
    question = state["question"]
    evidence = list(state.get("evidence") or [])
    draft = clean_answer(state.get("draft_answer"))
    masks = list(state.get("masks") or [])
    matcher = TurnIdMatcher(masks)
    evidence_ids = matcher.find(evidence)

    mode = ctx.memr3_answer_snippets
    thin = not evidence_ids or bool(state.get("memr3_router_fallback"))
    show_turns = mode in ("always", "all") or (mode == "when_thin" and thin)
    # memr3_answer_notes = ids: an answer call shown the turns reads the turns the bullets cite, not the bullets
    notes = not show_turns or ctx.memr3_answer_notes == "text"
    values = {"question": question, "evidence": bullets(evidence), "draft": draft or "(none)"}
    shown: list[tuple[list[str], str]] = []
    n_snippets = 0
    if show_turns:
        read = values.values() if notes else [question]
        fixed = estimate_tokens(answer_budget_prompt(ctx, True, notes) + "".join(read)) + 150
        shown, n_snippets = answer_turns(state, ctx, evidence_ids, ctx.max_prompt_tokens - fixed)
    snippet_texts = [s["text"] for s in state.get("memr3_snippets") or []]
    res: StructuredResult[AnswerReply] | None = None
    reply: AnswerReply | None = None
    if ctx.memr3_answer_from_router and draft and not is_no_info(draft) and grounded_in(draft, evidence + snippet_texts):
        # memr3_answer_from_router: the router's answer decision came with a draft found in what it was shown
        text, source = draft, "router draft (found in the evidence and turns shown; no answer call)"
        shown, n_snippets, layout = [], 0, None
    else:
        exchange = state.get("memr3_exchange") if show_turns and notes else None
        if exchange:
            sent, shown = continued_answer(state, ctx, exchange, shown, n_snippets)
            layout = "continues the router's exchange"
        else:
            sent = answer_messages(ctx, values, shown if show_turns else None, n_snippets, notes)
            layout = "own prompt"
        schema = BoundedAnswerReply if ctx.memr3_reply_bounds else AnswerReply
        res = call_structured(get_chat_model(ctx), sent, schema, node="answer", method=ctx.structured_method,
                              max_tokens=120)
        reply = res.value
        replied = clean_answer(reply.answer) if reply else ""
        if reply is not None and not is_no_info(replied):
            text, source = replied, "answer call"
        elif reply is not None and ctx.memr3_prefer_grounded_draft and draft and not is_no_info(draft) \
                and grounded_in(draft, evidence + snippet_texts + [t for _, t in shown]):
            text, source = draft, "grounded draft (the answer call found no answer)"
        elif reply is not None:
            text, source = NO_INFO, "answer call"
        else:  # spec fallback: the draft, else the reply's own text unless it is only JSON
            raw = clean_answer(res.raw)
            candidates = ((draft, "draft"), (raw, "raw reply"))
            text, source = next(((t, f) for t, f in candidates if t and not is_no_info(t)), (NO_INFO, "no info"))

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
    update: dict[str, Any] = {}
    usage, rewrite_note = (res.usage if res else {}), {}
    if ctx.memr3_answer_rewrite and not is_no_info(text):
        # Our addition (false = spec): the span rewrite MRAgent and MGRetrieval end with, shown the
        # turns the answer rests on with their dates, so "last week" or "2023-05-25" becomes a date.
        rewritten = rewrite_answer(ctx, question, text, critical[:REWRITE_MEMORIES], node="rewrite_answer")
        usage = merge_usage(usage, rewritten.usage)
        rewrite_note = rewritten.trace_fields(text)
        update["answer_before_rewrite"] = text  # the eval scores both, to show what the rewrite did
        text = rewritten.answer
    return {
        **update,
        "answer": text,
        "supports": supports,
        "critical_memories": critical,
        "usage": usage,
        "trace": emit("answer", answer=text, answer_from=source, supports=supports, **rewrite_note,
                      turns_shown=shown_ids if show_turns else None, thin_evidence=thin,
                      notes_shown=notes, answer_prompt=layout,
                      supports_from="answer text found in shown turns" if grounded and supports else None,
                      **(res.failure_note() if res and not reply else {})),
    }
