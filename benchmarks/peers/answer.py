"""Answer one question from a peer's search results, exactly as our `rag` baseline answers from its chunks.

Same prompt file (`prompts/baselines/answer.md`), same structured call (`AnswerReply`, 120 completion
tokens, the eval's structured method), same "No information available" fallback, and the same final
date step as every graph (`answer_absolute_dates`: relative times resolved against the date of the cited
or shown memory that says them). What differs is only what fills `{memories}`: one line per memory the
peer returned, `[M<n>] <session date> | <memory text>`, best first. The date is that of the latest session
whose ingestion wrote the memory (mem0's own LoCoMo protocol also shows each memory's timestamp).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel

from benchmarks.peers.base import Found, Provenance
from recollect.dates import DatedTurn, absolute_dates, parse_day, pick_reference, relative_phrases
from recollect.dialogue.turn_ids import TurnIdMatcher
from recollect.llm.structured import call_structured
from recollect.prompts import render_prompt
from recollect.steps import NO_INFO, AnswerReply, is_no_info, messages


@dataclass
class Answer:
    text: str
    cited: list[str]  # memory ids the model cited (of those shown)
    shown: list[str]  # memory ids shown, best first
    usage: dict[str, Any]
    model_answer: str  # before the date step
    date_note: dict[str, Any] | None = None
    failure: dict[str, Any] = field(default_factory=dict)


def memory_lines(found: list[Found], prov: Provenance) -> tuple[list[str], dict[str, str]]:
    """The prompt lines and label -> memory id."""
    labels: dict[str, str] = {}
    lines = []
    for i, item in enumerate(found, 1):
        label = f"M{i}"
        labels[label] = item.id
        date = prov.date_time(item.id)
        lines.append(f"[{label}] {date} | {item.text}" if date else f"[{label}] {item.text}")
    return lines, labels


def _dated(found: list[Found], labels: dict[str, str], prov: Provenance) -> dict[str, DatedTurn]:
    text = {f.id: f.text for f in found}
    return {label: DatedTurn(label, text.get(mid, ""), parse_day(prov.date_time(mid))) for label, mid in labels.items()}


def answer_question(model: BaseChatModel, question: str, found: list[Found], prov: Provenance, *, node: str,
                    structured_method: str = "auto", absolute: bool = True) -> Answer:
    lines, labels = memory_lines(found, prov)
    user = render_prompt("baselines", "answer", memories="\n".join(lines) or "(none)", question=question)
    res = call_structured(model, messages(None, user), AnswerReply, node=node, method=structured_method,
                          max_tokens=120)
    reply = res.value
    text = (reply.answer.strip() if reply else "") or (res.raw.strip() if not reply else "") or NO_INFO
    cited_labels = TurnIdMatcher(labels).resolve(reply.supports) if reply else []
    shown_labels = list(labels)
    model_answer, note = text, None
    if absolute and not is_no_info(text):
        phrases = relative_phrases(text)
        picked = pick_reference(phrases, cited_labels, shown_labels, _dated(found, labels, prov)) if phrases else None
        rewrite = absolute_dates(text, picked[0].day if picked else None)
        if rewrite.changes or rewrite.unresolved:
            text = rewrite.answer
            note = {"changes": rewrite.changes, "reference_memory": picked[0].id if picked else None,
                    "unresolved": rewrite.unresolved or None}
    return Answer(text=text, cited=[labels[c] for c in cited_labels], shown=[labels[s] for s in shown_labels],
                  usage=res.usage, model_answer=model_answer, date_note=note,
                  failure=res.failure_note() if not reply else {})
