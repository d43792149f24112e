"""MRAgent's forced final call: its own prompt (the paper's), or the continuation of the last navigate exchange;
and the final answer call (`mra_final_answer_tokens`) as that continuation (`mra_final_answer_continues`).

With `mra_answer_continues` the call resends the last navigate call's prompt and reply unchanged, then one new
user message: the final instructions, the memory lines the own prompt would show that the navigate prompt did
not hold (the last round's tool results, kept memories beyond it), and the question. A server that caches prompt
prefixes (llama.cpp's slot and host cache, OpenAI, vLLM) computes only that message. The memory lines are the own
prompt's, under the same budget, so the call is shown what the paper's call is shown; the navigate prompt's other
lines (the tool list, the seed beyond the budget) come on top.

The final answer call (answer.py) continues the same exchange with `recollect.turn_continue` when
`mra_final_answer_continues` is on: `exchange` keeps it for either call.
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
from recollect.llm.structured import invoke_counted, json_objects
from recollect.llm.usage import estimate_tokens
from recollect.prompts import load_prompt, render_prompt

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
