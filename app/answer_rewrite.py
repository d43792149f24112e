"""The short-answer rewrite: one call that turns a draft answer into a LoCoMo-style span.

MGRetrieval's final step (p_r3) and, behind `mra_answer_rewrite`, MRAgent's last call share it. The
call only reformats: it sees the draft, the memories the draft rests on (for dates) and, optionally,
the question. With `keep_draft`, a rewrite that drops the answer ("No information available" for a
real draft) or only echoes the question's own words keeps the draft instead; every such decision is
returned as a trace note.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from recollect.llm.lenient import Text
from recollect.llm.models import get_chat_model
from recollect.llm.structured import call_structured
from recollect.prompts import load_prompt, render_prompt
from recollect.settings import Context
from recollect.steps import NO_INFO, echoes_question, is_no_info, messages

PROMPTS = "common"
MAX_TOKENS = 60  # a span, never a paragraph
REWRITE_MEMORIES = 4  # memories shown after a graph's own answer: enough for dates, few prompt tokens


class RewriteReply(BaseModel):
    """The answer in LoCoMo style."""

    answer: Text


@dataclass
class Rewritten:
    answer: str  # the rewrite, or the draft when the rewrite was rejected or failed
    usage: dict[str, Any] = field(default_factory=dict)
    note: dict[str, Any] = field(default_factory=dict)  # trace fields: fallback rule, failure, rejected reply

    def trace_fields(self, draft: str) -> dict[str, Any]:
        """The answer record's fields when a graph rewrites its own answer: the draft, then the note's
        fields prefixed `rewrite_` (the fallback rule keeps its name, as every answer record has it)."""
        return {"draft": draft, **{k if k == "fallback_rule" else f"rewrite_{k}": v for k, v in self.note.items()}}


def memory_line(mem: dict[str, Any]) -> str:
    """`[id] (date) text`: the memory form of the rewrite prompt (`date`, else `date_time`)."""
    return f"[{mem['id']}] ({mem.get('date') or mem.get('date_time') or 'undated'}) {mem['text']}"


def memory_lines(mems: Iterable[dict[str, Any]], empty: str = "(none)") -> str:
    lines = [memory_line(m) for m in mems]
    return "\n".join(lines) if lines else empty


def date_rule(ctx: Context) -> dict[str, str]:
    """The rewrite prompt's rule for times. The spec has the model work out absolute dates (with a worked
    example); when the graphs' date step (`answer_absolute_dates`) dates the answer afterwards and
    `rewrite_dates_as_said` is on, the model copies the time as said and computes nothing."""
    if ctx.rewrite_dates_as_said and ctx.answer_absolute_dates:
        return {"date_rule": load_prompt(PROMPTS, "rewrite_dates_as_said"), "date_example": ""}
    return {"date_rule": load_prompt(PROMPTS, "rewrite_dates_model"),
            "date_example": load_prompt(PROMPTS, "rewrite_dates_model_example") + " "}


def rewrite_answer(ctx: Context, question: str, draft: str, memories: list[dict[str, Any]], *,
                   with_question: bool = True, keep_draft: bool = True, node: str = "rewrite") -> Rewritten:
    """Rewrite `draft` into a short span (one call, one retry on an invalid reply inside call_structured)."""
    question_line = render_prompt(PROMPTS, "rewrite_answer_question", question=question) if with_question else ""
    user = render_prompt(PROMPTS, "rewrite_answer", question_line=question_line, answer=draft or NO_INFO,
                         critical=memory_lines(memories), **date_rule(ctx))
    res = call_structured(get_chat_model(ctx, role="main"), messages(None, user), RewriteReply, node=node,
                          method=ctx.structured_method, max_tokens=MAX_TOKENS)
    final = res.value.answer.strip() if res.value is not None else ""
    note: dict[str, Any] = {} if res.value is not None else {**res.failure_note(), "fallback_rule": "draft answer unchanged"}
    if res.value is not None and not final:
        note = {"fallback_rule": "empty rewrite: draft answer unchanged"}
    elif final and keep_draft and is_no_info(final) and not is_no_info(draft):
        # The rewrite only reformats; it may not turn an answer into "no information".
        note = {"fallback_rule": "the rewrite dropped the draft's answer: draft answer unchanged", "rewrite_reply": final}
        final = ""
    elif final and keep_draft and echoes_question(final, question) and draft \
            and not is_no_info(draft) and not echoes_question(draft, question):
        # A rewrite made only of the question's own words ("Maya" for "What is the name of the dog
        # Maya adopted?") replaces an answer with an echo; the draft stays.
        note = {"fallback_rule": "the rewrite only echoed the question: draft answer unchanged", "rewrite_reply": final}
        final = ""
    return Rewritten(answer=final or draft or NO_INFO, usage=res.usage, note=note)
