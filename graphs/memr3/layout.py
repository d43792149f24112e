"""MemR3's two prompt layouts (README.md in this folder, "Prompt layout").

The paper's layout (`memr3_prefix_layout` false): the router's system message holds its instructions and
the decision directive, its user message the snippets, the tracker and the question; the answer call is one
user message with its own instructions first. Consecutive calls share almost no prefix.

The continued answer (`memr3_answer_continues`, paper layout only): the answer call resends the router call that
chose answer, its reply as the assistant's turn, and one new user message (`answer_continue`) with the answer
instructions, what the answer call would see that the router was not shown, and the question; only that
message is new to the server's prompt cache.

The prefix layout (true): every call of a question sends the same system message (`frame`), then a user
message that starts with the question and the latest retrieval's turns (`head`) and ends with the step's
task: the router's instructions, its tracker and directive, or the answer call's cited turns, instructions,
notes and draft. Each call sees what it saw before; only order and framing change. A router call after
`reflect` and the answer call after the router's `answer` share the prefix up to the end of the turns, so a
llama.cpp slot (or a remote endpoint's prefix cache) computes only the task part again.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from recollect.graphs.memr3.settings import MemR3Context
from recollect.prompts import load_prompt, render_prompt
from recollect.steps import messages

P = "memr3"


def snippet_lines(snippets: list[dict[str, Any]]) -> str:
    return "\n".join(s["text"] for s in snippets) if snippets else "(no new snippets)"


def router_budget_prompt(ctx: MemR3Context) -> str:
    """The router prompt text `retrieve` counts against the budget before packing the snippets."""
    if ctx.memr3_prefix_layout:
        return load_prompt(P, "frame") + load_prompt(P, "head") + load_prompt(P, "router_task")
    return load_prompt(P, "router_system")


def router_messages(ctx: MemR3Context, directive: str, values: dict[str, str], forced_note: str | None = None) -> list:
    """`values`: question, evidence, gaps, snippets, reasoning, prior_query (rendered text). `forced_note`
    (memr3_stable_router_system): the forced decision's directive, said after the question instead of in the
    system message, so the system message and the snippets stay a prefix the next call can reuse."""
    if not ctx.memr3_prefix_layout:
        system = render_prompt(P, "router_system", directive=directive)
        user = render_prompt(P, "router_user", **values)
        return messages(system, f"{user}\n\n{render_prompt(P, 'forced_note', directive=forced_note)}"
                        if forced_note else user)
    head = render_prompt(P, "head", question=values["question"], snippets=values["snippets"])
    # The question again right before the reply: the paper's prompts end with it, and the small model answers
    # what it read last; these few tokens come after the shared prefix, so they cost nothing in reuse.
    task = render_prompt(P, "router_task", directive=directive, evidence=values["evidence"], gaps=values["gaps"],
                         reasoning=values["reasoning"], prior_query=values["prior_query"],
                         question=values["question"])
    return messages(load_prompt(P, "frame"), f"{head}\n\n{task}")


def _answer_prompt(ctx: MemR3Context, notes: bool) -> str:
    """The answer call's template when it sees turns: with the notes and draft, or (memr3_answer_notes = ids)
    with the turns only."""
    if ctx.memr3_prefix_layout:
        return "answer_task" if notes else "answer_turns_task"
    return "answer_turns" if notes else "answer_turns_only"


def answer_budget_prompt(ctx: MemR3Context, show_turns: bool, notes: bool = True) -> str:
    if not ctx.memr3_prefix_layout:
        return load_prompt(P, _answer_prompt(ctx, notes) if show_turns else "answer")
    return load_prompt(P, "frame") + load_prompt(P, "head") + load_prompt(P, _answer_prompt(ctx, notes))


def answer_messages(ctx: MemR3Context, values: dict[str, str], shown: list[tuple[list[str], str]] | None,
                    n_snippets: int, notes: bool = True) -> list:
    """The answer call's messages. `shown` (None: the call sees no turns) is the packed snippets (the first
    `n_snippets`) followed by the cited turns that are not among them; `values`: question, evidence, draft;
    `notes` false: a call that sees turns is not shown the evidence and draft."""
    if not ctx.memr3_prefix_layout:
        if shown is None:
            return messages(None, render_prompt(P, "answer", **values))
        turns = "\n".join(t for _, t in shown) or "(none)"
        return messages(None, render_prompt(P, _answer_prompt(ctx, notes), turns=turns, **values))
    task_values = {"evidence": values["evidence"], "draft": values["draft"], "question": values["question"]}
    if shown is None:
        head = render_prompt(P, "head_question", question=values["question"])
        return messages(load_prompt(P, "frame"), f"{head}\n\n" + render_prompt(P, "answer_notes_task", **task_values))
    snippets = [t for _, t in shown[:n_snippets]]
    head = render_prompt(P, "head", question=values["question"],
                         snippets="\n".join(snippets) if snippets else "(no new snippets)")
    cited = [t for _, t in shown[n_snippets:]]
    cited_block = render_prompt(P, "answer_cited", turns="\n".join(cited)) + "\n\n" if cited else ""
    task = render_prompt(P, _answer_prompt(ctx, notes), cited=cited_block, **task_values)
    return messages(load_prompt(P, "frame"), f"{head}\n\n{task}")


def continued_answer_messages(exchange: dict[str, Any], question: str, earlier: list[str]) -> list[BaseMessage]:
    """The answer call as the continuation of the router's exchange (memr3_answer_continues). `earlier`: the
    turns and notes the answer call would see that the router's prompt did not hold, each a line."""
    block = render_prompt(P, "answer_earlier", lines="\n".join(earlier)) if earlier else ""
    task = render_prompt(P, "answer_continue", earlier=block, question=question)
    head: list[BaseMessage] = [SystemMessage(content=exchange["system"])] if exchange.get("system") else []
    return head + [HumanMessage(content=exchange["user"]), AIMessage(content=exchange["reply"]),
                   HumanMessage(content=task)]


def continued_answer_budget_text(exchange: dict[str, Any], question: str) -> str:
    """The continued answer call's text other than `earlier`, which the prompt budget counts first."""
    return exchange["user"] + exchange["reply"] + load_prompt(P, "answer_continue") + question
