"""HyMem's two prompt layouts (README.md in this folder, "Prompt layout").

The paper's layout (`hymem_prefix_layout` false): each call is one user message, its instructions first,
then its memory, then the question (`light`, `deep_select`, `deep_answer`, `reflect`). Consecutive calls
share no prefix: each starts with its own instructions.

The prefix layout (true): every call of a question sends the same system message (`frame`), then a user
message that starts with the question and the call's memory (`head_*`) and ends with the step's task
(`*_task`). The light call and the deep selection both show numbered summaries ranked for the same query,
numbered from 0, so the selection's first batch starts with the light call's summaries: on the deep path the
selection computes only its further summaries and its task again. The deep answer and reflect share the
frame and the question. Each call sees what it saw before; only order and framing change.
"""

from __future__ import annotations

from typing import Any

from recollect.graphs.hymem.settings import HyMemContext
from recollect.prompts import load_prompt, render_prompt
from recollect.steps import messages

P = "hymem"
# Each call's head template (the question, then the call's memory) and the value of the paper's template
# that holds that memory; the head's placeholder for it is the template's own (`lines`, `context`, `answer`).
_HEAD = {"light": ("head_summaries", "context"), "light_turns": ("head_turns", "context"), "deep_select": ("head_summaries", "lines"),
         "deep_answer": ("head_sessions", "context"), "reflect": ("head_answer", "answer")}
_SLOT = {"head_summaries": "lines", "head_turns": "lines", "head_sessions": "context", "head_answer": "answer"}


def budget_prompt(ctx: HyMemContext, name: str) -> str:
    """The template text of call `name` that a budget counts before its memory and question."""
    if not ctx.hymem_prefix_layout:
        return load_prompt(P, name)
    return load_prompt(P, "frame") + load_prompt(P, _HEAD[name][0]) + load_prompt(P, f"{name}_task")


def call_messages(ctx: HyMemContext, name: str, values: dict[str, Any]) -> list:
    """The messages of call `name` (`light`, `deep_select`, `deep_answer`, `reflect`); `values` fill the
    paper's template of that name: the question, the memory (`context`, `lines` or `answer`) and `style`."""
    if not ctx.hymem_prefix_layout:
        return messages(None, render_prompt(P, name, **values))
    head_name, memory = _HEAD[name]
    head = render_prompt(P, head_name, question=values["question"], **{_SLOT[head_name]: values[memory]})
    task = render_prompt(P, f"{name}_task", **{k: v for k, v in values.items() if k == "style"})
    return messages(load_prompt(P, "frame"), f"{head}\n\n{task}")
