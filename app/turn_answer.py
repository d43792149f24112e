"""One answer call over the turns a method chose, in the baselines' answer prompt and at rag's budget.

Issue 35: on the decisive rows HyMem showed the model more of the gold turns than rag (75.6 against 70.2 %)
and its answers cited more of them (45.4 against 34.9 %), yet it scored 7.7 F1 points below rag. The turns
were there; its answer steps (a strict light judgement, a deep answer over whole sessions, a span rewrite)
turned them into longer or wrong answers. A method keeps its own retrieval and decisions and hands the turns
they chose to this step, which writes the answer as rag does: the same prompt, the same turn lines
(`Turn.render`), the same 120-token reply, within a token budget comparable to rag's five chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recollect.budget import pack
from recollect.dialogue.models import Turn
from recollect.llm.models import get_chat_model
from recollect.llm.structured import StructuredResult, call_structured
from recollect.llm.usage import estimate_tokens
from recollect.memory.turn_ranking import ranked_turns
from recollect.prompts import render_prompt
from recollect.settings import Context
from recollect.steps import AnswerReply, clean_answer, grounded_supports, is_no_info, messages, workspace

ANSWER_MAX_TOKENS = 120  # rag's answer call


@dataclass
class TurnAnswer:
    """The answer call's outcome. `answer` is empty when the call gave no usable answer (an invalid reply
    after its retry, or "No information available"): the caller keeps what it had and says so."""

    answer: str
    supports: list[str]
    shown: list[str]
    usage: dict[str, Any]
    trace: dict[str, Any] = field(default_factory=dict)


def with_neighbours(turns: dict[str, Turn], ids: list[str], width: int) -> list[str]:
    """`ids` (those of `turns`, a conversation's turns in order), then the turns up to `width` places before and
    after each in its own session, in conversation order, each once. Issue 35: a retrieved turn is often a reply
    ("Yes, last May!") whose subject is in the turn before it, or a question whose answer is the turn after it;
    rag's chunks of neighbouring turns show them together, a method's single turns do not."""
    known = [t for t in dict.fromkeys(ids) if t in turns]
    if width <= 0:
        return known
    order = list(turns)
    position = {tid: i for i, tid in enumerate(order)}
    around = [order[j] for tid in known
              for j in range(max(0, position[tid] - width), min(len(order), position[tid] + width + 1))
              if turns[order[j]].session == turns[tid].session]
    return list(dict.fromkeys(known + sorted(around, key=position.__getitem__)))


def turns_for_answer(ctx: Context, namespace: str, question: str, first: list[str], chosen: list[str],
                     budget: int) -> tuple[list[str], list[str]]:
    """The turns the answer call reads, in conversation order, and those left out for the budget: `first`
    (e.g. a draft's supports) in their order, then the rest of `chosen` ranked for the question (cosine and
    BM25 fused), while their lines fit `budget` tokens (the first always fits)."""
    turns = workspace(ctx).turns(namespace)
    known = [t for t in dict.fromkeys(first + chosen) if t in turns]
    lead = [t for t in dict.fromkeys(first) if t in turns]
    rest = [t for t in known if t not in set(lead)]
    order = lead + ranked_turns(workspace(ctx), namespace, question, rest, len(rest), "hybrid")
    packed = pack(order, budget, lambda tid: estimate_tokens(turns[tid].render()), keep_first=True)
    position = {tid: i for i, tid in enumerate(turns)}
    return sorted(packed.kept, key=position.__getitem__), list(packed.dropped)


def answer_from_turns(ctx: Context, namespace: str, question: str, first: list[str], chosen: list[str],
                      budget: int, node: str) -> TurnAnswer:
    """Answer `question` from the chosen turns (see `turns_for_answer`) with the baselines' answer prompt.
    Supports are the cited ids among the turns shown, else the shown turns holding the answer's words."""
    shown, left_out = turns_for_answer(ctx, namespace, question, first, chosen, budget)
    if not shown:
        return TurnAnswer("", [], [], {}, {"final_answer": "no turns to read", "calls": 0})
    turns = workspace(ctx).turns(namespace)
    memories = "\n".join(turns[t].render() for t in shown)
    user = render_prompt("baselines", "answer", memories=memories, question=question)
    res = call_structured(get_chat_model(ctx), messages(None, user), AnswerReply, node=node,
                          method=ctx.structured_method, max_tokens=ANSWER_MAX_TOKENS)
    note: dict[str, Any] = {"calls": 1, "final_turn_ids": shown, "final_left_out_for_budget": left_out}
    return read_reply(ctx, namespace, res, shown, set(shown), note)


def read_reply(ctx: Context, namespace: str, res: StructuredResult[AnswerReply], picked: list[str],
               citable: set[str], note: dict[str, Any]) -> TurnAnswer:
    """The answer call's reply, whatever its prompt's layout: no answer for an invalid reply (after its retry) or
    "No information available"; else the answer, supported by the turns of `citable` it cites (each once), else by
    the `picked` turns holding its words."""
    reply = res.value
    if reply is None:
        return TurnAnswer("", [], picked, res.usage, {**note, **res.failure_note()})
    text = clean_answer(reply.answer)
    if is_no_info(text):
        return TurnAnswer("", [], picked, res.usage, {**note, "final_reply": "no information"})
    cited = [t for t in dict.fromkeys(reply.supports) if t in citable]
    supports = cited or grounded_supports(ctx, namespace, text, picked)
    return TurnAnswer(text, supports, picked, res.usage, {
        **note, "final_supports_from": "cited" if cited else "answer text found in shown turns"})
