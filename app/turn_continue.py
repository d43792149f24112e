"""The answer call of `recollect.turn_answer` as the continuation of a method's last exchange (issue 34).

A method's last call that read turns (MGRetrieval's last assess round, HyMem's light or deep call) already sent the model most of the turns the answer call
reads. Re-sending them in rag's own prompt costs a CPU server their whole prefill again, since no earlier prompt
of the question begins the same way. Continued instead, the call re-sends that exchange unchanged (its prompt and
reply: a server that caches prompt prefixes, as llama.cpp's slots, OpenAI and vLLM do, computes none of it) and
one new message: rag's answer rules, the picked turns whose text that prompt did not hold, in rag's turn lines
(`Turn.render`), and the question. It reads the same turns as rag's own prompt would, plus the exchange's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from recollect.llm.models import get_chat_model
from recollect.llm.structured import call_structured
from recollect.llm.usage import estimate_tokens
from recollect.prompts import render_prompt
from recollect.settings import Context
from recollect.steps import AnswerReply, workspace
from recollect.turn_answer import (
    ANSWER_MAX_TOKENS,
    TurnAnswer,
    answer_from_turns,
    read_reply,
    turns_for_answer,
)

# A continued prompt, estimated, may not pass this: the local runtime's window is 8,192 tokens a slot and the
# reply takes up to ANSWER_MAX_TOKENS; the margin covers the estimate's error and the chat template's tokens.
CONTINUE_MAX_TOKENS = 7000
LAYOUT = "continues the last exchange"


def exchange_of(messages: list[BaseMessage], reply: str | None) -> dict[str, str] | None:
    """What a method keeps of a call for the answer call to continue: its system message (if any), its user
    message and the reply as written; None for a call that is not one user message, or without a reply."""
    system = [str(m.content) for m in messages if isinstance(m, SystemMessage)]
    users = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
    if len(users) != 1 or len(system) > 1 or len(messages) != len(users) + len(system) or not (reply or "").strip():
        return None
    return {**({"system": system[0]} if system else {}), "prompt": users[0], "reply": str(reply)}


def continued_answer(ctx: Context, namespace: str, question: str, exchange: dict[str, str], first: list[str],
                     chosen: list[str], budget: int, task: tuple[str, str], shown_before: Iterable[str] = (),
                     node: str = "final_answer") -> TurnAnswer | None:
    """Answer `question` from the turns `turns_for_answer` picks, continuing `exchange` with the message of prompt
    `task` (folder, name; it takes `memories` and `question`). None when the continued prompt would not fit the
    runtime's window: the caller uses rag's own prompt (`answer_from_turns`). Supports are the cited turns the chat
    showed (the picked ones, and those of `shown_before` the exchange's prompt held), else the picked turns holding
    the answer's words."""
    picked, left_out = turns_for_answer(ctx, namespace, question, first, chosen, budget)
    if not picked:
        return TurnAnswer("", [], [], {}, {"final_answer": "no turns to read", "calls": 0})
    turns = workspace(ctx).turns(namespace)

    def above(tid: str) -> bool:  # the exchange's prompt held the turn's text (in the method's own line format)
        return f"{turns[tid].speaker}: {turns[tid].full_text}" in exchange["prompt"]

    new = [t for t in picked if not above(t)]
    message = render_prompt(*task, question=question,
                            memories="\n".join(turns[t].render() for t in new) or "(none beyond those above)")
    messages: list[BaseMessage] = [*([SystemMessage(content=exchange["system"])] if exchange.get("system") else []),
                                   HumanMessage(content=exchange["prompt"]), AIMessage(content=exchange["reply"]),
                                   HumanMessage(content=message)]
    if sum(estimate_tokens(str(m.content)) for m in messages) > CONTINUE_MAX_TOKENS:
        return None
    res = call_structured(get_chat_model(ctx), messages, AnswerReply, node=node, method=ctx.structured_method,
                          max_tokens=ANSWER_MAX_TOKENS)
    note: dict[str, Any] = {"calls": 1, "final_layout": LAYOUT, "final_turn_ids": picked,
                            "final_new_turn_ids": new, "final_left_out_for_budget": left_out}
    in_chat = set(picked) | {t for t in shown_before if t in turns and above(t)}
    return read_reply(ctx, namespace, res, picked, in_chat, note)


def final_turn_answer(ctx: Context, namespace: str, question: str, first: list[str], chosen: list[str], budget: int,
                      exchange: dict[str, str] | None, task: tuple[str, str],
                      shown_before: Iterable[str] = ()) -> TurnAnswer:
    """A method's final answer call (node `final_answer`): the continuation of `exchange` with prompt `task` when
    the method kept one (its `*_final_answer_continues` setting) and it fits the window, else rag's own prompt."""
    if exchange:
        continued = continued_answer(ctx, namespace, question, exchange, first, chosen, budget, task, shown_before)
        if continued is not None:
            return continued
    return answer_from_turns(ctx, namespace, question, first, chosen, budget, node="final_answer")
