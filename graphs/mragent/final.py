"""MRAgent's forced final call: its own prompt (the paper's), or the continuation of the last navigate exchange;
and the final answer call (`mra_final_answer_tokens`) as that continuation (`mra_final_answer_continues`).

With `mra_answer_continues` the call resends the last navigate call's prompt and reply unchanged, then one new
user message: the final instructions, the memory lines the own prompt would show that the navigate prompt did
not hold (the last round's tool results, kept memories beyond it), and the question. A server that caches prompt
prefixes (llama.cpp's slot and host cache, OpenAI, vLLM) computes only that message. The memory lines are the own
prompt's, under the same budget, so the call is shown what the paper's call is shown; the navigate prompt's other
lines (the tool list, the seed beyond the budget) come on top.

The final answer call reads the turns `recollect.turn_answer.turns_for_answer` picks (the navigate answer's
citations first, then the rest ranked, within the budget). Continued, its new message holds rag's answer rules
and, in rag's turn lines, only the picked turns whose text the navigate prompt did not hold; the others are
read above. Its own prompt (rag's, `recollect.turn_answer.answer_from_turns`) re-sends every picked turn and
the server computes all of it: about 1,300 more prompt tokens a question than the continuation.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import ValidationError

from recollect.graphs.mragent.prompting import P, Rendered, final_evidence
from recollect.graphs.mragent.protocol import json_bound
from recollect.graphs.mragent.schemas import BoundedFinalReply, FinalReply
from recollect.graphs.mragent.settings import MRAgentContext
from recollect.graphs.mragent.state import MRAgentState
from recollect.graphs.mragent.store import CueTagGraph
from recollect.llm.models import get_chat_model
from recollect.llm.structured import call_structured, invoke_counted, json_objects
from recollect.llm.usage import estimate_tokens
from recollect.prompts import load_prompt, render_prompt
from recollect.steps import AnswerReply, clean_answer, grounded_supports, is_no_info, workspace
from recollect.turn_answer import ANSWER_MAX_TOKENS, TurnAnswer, turns_for_answer

FINAL_MAX_TOKENS = 200
# The continued call's prompt, estimated, may not pass this: the local runtime's window is 8,192 tokens a slot and
# the reply takes up to FINAL_MAX_TOKENS; the margin covers the estimate's error and the chat template's tokens.
CONTINUE_MAX_TOKENS = 7000


def exchange(ctx: MRAgentContext, prompt: str, reply: str) -> dict[str, Any] | None:
    """What a navigate call leaves for the final call to continue (None where it cannot be continued)."""
    continued = ctx.mra_answer_continues or (ctx.mra_final_answer_tokens > 0 and ctx.mra_final_answer_continues)
    if not continued or ctx.mra_tool_protocol != "json" or not reply.strip():
        return None
    return {"prompt": prompt, "reply": reply}


def continued_messages(state: MRAgentState, sent: dict[str, Any], lines: list[str]) -> list[BaseMessage]:
    """The final call as the continuation of the navigate exchange `sent`: its memory lines not already in the
    navigate prompt (a line is a turn's or a tool's text, rendered the same way in both prompts)."""
    new = [line for line in lines if line not in sent["prompt"]]
    task = render_prompt(P, "final_continue", evidence="\n".join(new) or "(none beyond those above)",
                         question=state["question"], answer_rules=load_prompt(P, "answer_rules"))
    return [HumanMessage(content=sent["prompt"]), AIMessage(content=sent["reply"]), HumanMessage(content=task)]


def final_messages(state: MRAgentState, ctx: MRAgentContext, g: CueTagGraph) -> tuple[Rendered, list[BaseMessage], str]:
    """The forced final call's messages, what they show, and which layout they use."""
    rendered, lines = final_evidence(state, ctx, g)
    sent = state.get("mra_exchange") if ctx.mra_answer_continues else None
    if sent:
        messages = continued_messages(state, sent, lines)
        size = sum(estimate_tokens(str(m.content)) for m in messages)
        if size <= CONTINUE_MAX_TOKENS:
            rendered.prompt = str(messages[-1].content)
            return rendered, messages, "continues the last navigate exchange"
        layout = f"own prompt (the continued one would take about {size} tokens)"
    else:
        layout = "own prompt"
    rendered.prompt = render_prompt(P, "final_answer", evidence="\n".join(lines) or "(none)",
                                    question=state["question"], answer_rules=load_prompt(P, "answer_rules"))
    return rendered, [HumanMessage(content=rendered.prompt)], layout


def forced_reply(state: MRAgentState, ctx: MRAgentContext, g: CueTagGraph
                 ) -> tuple[Rendered, FinalReply | None, dict[str, Any], str, str]:
    """The forced final call: one call, no retry (the loop's max_rounds LLM calls include it). Returns what it
    showed, the reply (None when unreadable), usage, the raw text and the prompt layout."""
    shown, messages, layout = final_messages(state, ctx, g)
    schema = BoundedFinalReply if ctx.mra_reply_bounds else FinalReply
    msg, usage = invoke_counted(json_bound(get_chat_model(ctx), ctx, schema, FINAL_MAX_TOKENS), messages, "answer")
    content = msg.content if isinstance(msg.content, str) else json.dumps(msg.content)
    for obj in json_objects(content):
        try:
            return shown, FinalReply.model_validate(obj), usage, content, layout
        except ValidationError:
            continue
    return shown, None, usage, content, layout


# The twin of recollect.turn_continue.continued_answer (MGRetrieval's), written first: it goes onto that one with
# MRAgent's next measured change, since a move alone would send MRAgent's decisive rows to be computed again.
def continued_turn_answer(ctx: MRAgentContext, state: MRAgentState, sent: dict[str, Any], first: list[str],
                          chosen: list[str], budget: int) -> TurnAnswer | None:
    """The final answer call as the continuation of the navigate exchange `sent` (see the module's docstring).
    None when the continued prompt would not fit the local runtime's window: the caller uses rag's own prompt.
    Supports are the cited turns the chat showed, else the picked turns holding the answer's words."""
    ns, question = state["namespace"], state["question"]
    picked, left_out = turns_for_answer(ctx, ns, question, first, chosen, budget)
    if not picked:
        return TurnAnswer("", [], [], {}, {"final_answer": "no turns to read", "calls": 0})
    turns = workspace(ctx).turns(ns)

    def above(tid: str) -> bool:  # the navigate prompt held the turn's text (in its own line format)
        return f"{turns[tid].speaker}: {turns[tid].full_text}" in sent["prompt"]

    new = [t for t in picked if not above(t)]
    task = render_prompt(P, "final_turns_continue", question=question,
                         memories="\n".join(turns[t].render() for t in new) or "(none beyond those above)")
    messages = [HumanMessage(content=sent["prompt"]), AIMessage(content=sent["reply"]), HumanMessage(content=task)]
    size = sum(estimate_tokens(str(m.content)) for m in messages)
    if size > CONTINUE_MAX_TOKENS:
        return None
    res = call_structured(get_chat_model(ctx), messages, AnswerReply, node="final_answer",
                          method=ctx.structured_method, max_tokens=ANSWER_MAX_TOKENS)
    note: dict[str, Any] = {"calls": 1, "final_layout": "continues the last navigate exchange",
                            "final_turn_ids": picked, "final_new_turn_ids": new, "final_left_out_for_budget": left_out}
    reply = res.value
    text = clean_answer(reply.answer) if reply is not None else ""
    if reply is None:
        return TurnAnswer("", [], picked, res.usage, {**note, **res.failure_note()})
    if is_no_info(text):
        return TurnAnswer("", [], picked, res.usage, {**note, "final_reply": "no information"})
    in_chat = set(picked) | {t for t in state.get("masks") or [] if t in turns and above(t)}
    cited = [t for t in dict.fromkeys(reply.supports) if t in in_chat]
    supports = cited or grounded_supports(ctx, ns, text, picked)
    return TurnAnswer(text, supports, picked, res.usage,
                      {**note, "final_supports_from": "cited" if cited else "answer text found in shown turns"})
