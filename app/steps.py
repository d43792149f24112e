"""Pieces every graph shares: snippet sources, turn-id citations, supports and final answers."""

from __future__ import annotations

import re
import types
import typing
import uuid
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Overwrite
from pydantic import BaseModel, Field, field_validator

from recollect.answer_dates import absolute_answer_dates
from recollect.dialogue.turn_ids import LOCOMO_ID, TurnIdMatcher, id_items
from recollect.llm.lenient import Text
from recollect.llm.models import get_chat_model, model_entry
from recollect.llm.structured import call_structured, extract_json
from recollect.llm.usage import cost_summary
from recollect.memory.build_status import status_note
from recollect.memory.chunks import ChunkSettings, chunk_index
from recollect.memory.retriever import ExternalRetriever, MaskedRetriever, SnippetSource
from recollect.memory.run_store import run_workspace
from recollect.memory.workspace import NamespaceError, Workspace, validate_namespace
from recollect.prompts import render_prompt
from recollect.settings import Context
from recollect.state import MemoryState, thread_namespace
from recollect.trace import emit

NO_INFO = "No information available"
TURN_ID = LOCOMO_ID  # LoCoMo-shaped ids only; graphs match ids of any shape with recollect.dialogue.turn_ids.TurnIdMatcher


def workspace(ctx: Context) -> Workspace:
    """The data directory's workspace, on the run's `runtime.store` (recollect.memory.run_store)."""
    return run_workspace(ctx.data_dir)


def snippet_source(ctx: Context, namespace: str) -> SnippetSource:
    """The injected LangChain retriever if any, else the namespace's masked chunk retriever."""
    if ctx.retriever is not None:
        return ExternalRetriever(ctx.retriever)
    if not isinstance(ctx, ChunkSettings):
        raise TypeError(f"{type(ctx).__name__} has no chunk memory settings (ChunkSettings): "
                        "only memr3's and rag's contexts read the chunk memory")
    ws = workspace(ctx)
    ws.require_namespace(namespace)
    index = chunk_index(ws, namespace, ctx)
    if index.count() == 0:
        raise NamespaceError(
            f"namespace {namespace!r} has no MemR3 chunks (chunk_tokens={ctx.memr3_chunk_tokens}); "
            f"run `recollect ingest FILE --namespace {namespace}`"
        )
    return MaskedRetriever(index, candidate_k=ctx.memr3_candidate_k, rerank=ctx.memr3_rerank)


def cited_ids(texts: Iterable[str], known: Iterable[str] | None = None) -> list[str]:
    """Turn ids cited in free text, in first-seen order: any of `known`, else LoCoMo-shaped ids."""
    if known is not None:
        return TurnIdMatcher(known).find(list(texts))
    seen: dict[str, None] = {}
    for text in texts:
        for tid in TURN_ID.findall(text or ""):
            seen.setdefault(tid, None)
    return list(seen)


_NO_INFO_FORMS = frozenset({"no information available", "no information", "not mentioned", "unknown", "none",
                            "n/a", "not available", "no answer", "not specified", "not enough information"})


def is_no_info(text: str | None) -> bool:
    """An empty answer, or one that only says the memory does not hold it."""
    norm = " ".join((text or "").lower().split()).strip(" .!\"'")
    return not norm or norm in _NO_INFO_FORMS or norm.startswith("no information available")


def clean_answer(text: str | None) -> str:
    """An answer fit to show the user: a reply that is only JSON gives its "answer" text, or nothing.

    A small model that fails validation often leaves a JSON object (`{"answer": ""}`, or one with
    the answer under another key) as its raw text; that object is never an answer itself.
    """
    out = (text or "").strip()
    if not out.startswith(("{", "[", "```")):
        return out
    try:
        data = extract_json(out)
    except ValueError:
        return ""
    inner = data.get("answer") if isinstance(data, dict) else None
    return clean_answer(inner) if isinstance(inner, str) and not inner.strip().startswith(("{", "[")) else ""


def critical_from_turns(ctx: Context, namespace: str, ids: Iterable[str], fallback: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """`{id, text}` for each id, from the turn store (or `fallback` texts for foreign retrievers)."""
    turns = workspace(ctx).turns(namespace) if ctx.retriever is None else {}
    out = []
    for tid in ids:
        turn = turns.get(tid)
        if turn is not None:
            out.append({"id": tid, "text": f"{turn.speaker}: {turn.full_text}", "date_time": turn.date_time})
        elif fallback and tid in fallback:
            out.append({"id": tid, "text": fallback[tid]})
    return out


def grounded_supports(ctx: Context, namespace: str, answer: str, candidates: Iterable[str], limit: int = 3) -> list[str]:
    """Shown turns whose text contains the answer: the last resort when the model cited no ids.

    Small models often answer correctly but forget the ids; a verbatim match in a turn that was
    actually shown is evidence the answer rests on, and it never adds an unseen turn.
    """
    if _needle(answer) == NO_INFO.lower() or ctx.retriever is not None:
        return []
    turns = workspace(ctx).turns(namespace)
    out = []
    for tid in candidates:
        turn = turns.get(tid)
        if turn is not None and contains_answer(answer, turn.full_text):
            out.append(tid)
            if len(out) >= limit:
                break
    return out


_WORD = re.compile(r"[a-z0-9]+")
# Words too common to show that an answer rests on a text.
_COMMON = frozenset({
    "the", "and", "was", "were", "that", "this", "with", "for", "from", "her", "his", "she", "they", "them",
    "their", "has", "had", "have", "not", "are", "about", "after", "before", "into", "also", "then", "than",
    "did", "does", "when", "where", "who", "what",
})


def _needle(answer: str) -> str:
    return " ".join((answer or "").lower().split()).strip(" .")


def contains_answer(answer: str, text: str) -> bool:
    """The answer (3+ characters, case and spacing ignored) occurs verbatim in the text."""
    needle = _needle(answer)
    return len(needle) >= 3 and needle in " ".join((text or "").lower().split())


def echoes_question(answer: str, question: str) -> bool:
    """Every word of the answer is a word of the question: an echo, not an answer."""
    words = set(_WORD.findall((answer or "").lower()))
    return bool(words) and words <= set(_WORD.findall(question.lower()))


def grounded_in(text: str, sources: Iterable[str]) -> bool:
    """At least half of the answer's content words (3+ characters, not too common) occur in the sources."""
    words = {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _COMMON}
    if not words:
        return False
    seen = set(_WORD.findall(" ".join(sources).lower()))
    return 2 * len(words & seen) >= len(words)


def messages(system: str | None, user: str) -> list:
    return ([SystemMessage(content=system)] if system else []) + [HumanMessage(content=user)]


class AnswerReply(BaseModel):
    """The short final answer and the turn ids it rests on."""

    answer: Text = Field(description="a short phrase")
    supports: list[str] = Field(default_factory=list)

    @field_validator("supports", mode="before")
    @classmethod
    def _ids(cls, v: Any) -> Any:
        return id_items(v)  # "[D1:1]", "bob-q1", "D1:1, D1:2": graphs match them to the ids shown


def bullets(items: Iterable[str], empty: str = "(none)") -> str:
    return "\n".join(f"- {x}" for x in items if x and x.strip()) or empty


# --- the question lifecycle: one thread holds a conversation of questions -----------------------

# Keys that belong to the thread, not to one question: every other key of a graph's state schema is
# reset when a new question starts, so a key a method adds to its state is reset without anyone
# listing it here.
THREAD_KEYS = frozenset({"namespace", "question", "messages", "question_message_id"})


def _empty_value(hint: Any) -> tuple[Any, bool]:
    """(fresh value, has a reducer) for one state annotation: None for optionals, else an empty value."""
    reducer = False
    while True:
        origin = typing.get_origin(hint)
        if origin is typing.Annotated:
            reducer = reducer or any(callable(m) for m in hint.__metadata__)
            hint = hint.__origin__
        elif origin in (typing.NotRequired, typing.Required):
            hint = typing.get_args(hint)[0]
        else:
            break
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        return None, reducer
    base = origin or hint
    for kind, empty in ((list, list), (dict, dict), (bool, bool), (int, int), (float, float), (str, str)):
        if isinstance(base, type) and issubclass(base, kind):
            return empty(), reducer
    return None, reducer


@lru_cache(maxsize=16)
def per_question_fields(schema: type = MemoryState) -> dict[str, tuple[Any, bool]]:
    """Every per-question key of a state schema with its fresh value and whether it has a reducer."""
    hints = typing.get_type_hints(schema, include_extras=True)
    return {key: _empty_value(hint) for key, hint in hints.items() if key not in THREAD_KEYS}


def fresh_question_fields(schema: type = MemoryState) -> dict[str, Any]:
    """An update that resets every per-question key; reducer keys get `Overwrite` so they empty."""
    out: dict[str, Any] = {}
    for key, (value, reducer) in per_question_fields(schema).items():
        value = type(value)() if isinstance(value, list | dict) else value  # never share a mutable
        out[key] = Overwrite(value) if reducer else value
    return out


def _message_text(message: Any) -> str:
    content = getattr(message, "content", "")
    parts = [content] if isinstance(content, str) else [p.get("text", "") if isinstance(p, dict) else str(p)
                                                        for p in content or []]
    return " ".join(x for x in parts if x)


def start_question(state: MemoryState, runtime: Runtime[Context], schema: type = MemoryState) -> dict[str, Any]:
    """Start a new question on the thread: resolve question and namespace, reset the per-question keys
    of the graph's state `schema`, and rewrite a follow-up into a standalone question (`rewrite_followups`).

    The question is a human message the caller just sent (the last message, not yet answered), else
    the `question` input, which is then added to `messages` so the thread reads as a conversation.
    `messages` keep the question as asked; `question` holds the one the graph answers.
    """
    history = list(state.get("messages") or [])
    last = history[-1] if history else None
    update: dict[str, Any] = fresh_question_fields(schema)
    if (
        isinstance(last, HumanMessage) and bool(_message_text(last).strip())
        and last.id is not None and last.id != state.get("question_message_id")
    ):  # a new chat message
        question = _message_text(last).strip()
        message_id = last.id
        history = history[:-1]
    else:
        question = (state.get("question") or "").strip()
        if not question:
            raise ValueError("the question is empty: pass `question`, or a human message in `messages`")
        message_id = f"question-{uuid.uuid4().hex}"
        # A message dict, not a HumanMessage: the `messages` stream sends every message object a node
        # returns, and a chat client is sent only the answer (add_messages makes it a HumanMessage).
        update["messages"] = [{"type": "human", "content": question, "id": message_id}]
    namespace = thread_namespace(state.get("namespace")) or runtime.context.namespace  # refuses a switch
    if not namespace:
        raise NamespaceError("no namespace: pass `namespace` in the input or set the `namespace` setting")
    validate_namespace(namespace)
    ctx = runtime.context
    if ctx is not None:
        model_entry(ctx.model)  # an unknown `model` fails here, before any retrieval
    update.update(namespace=namespace, question_message_id=message_id)
    # memory still being built in the background (recollect.agent_memory) is said first: the answer reads less
    status = status_note(workspace(ctx), namespace) if ctx is not None and ctx.retriever is None else None
    records = emit("memory_status", **status) if status else []
    earlier = _earlier_turns(history)
    if ctx is not None and ctx.rewrite_followups and earlier:
        question, note, usage = rewrite_followup(ctx, question, earlier)
        records += emit("rewrite_question", **note)
        update["usage"] = Overwrite(usage)
    update.update(question=question, trace=Overwrite(records))
    return update


# --- follow-ups: a question that refers back to the thread's earlier turns, made standalone ----------------
# A question of four or more words with none of these words, not opening with a connective, reads on its own.
_REFERS_BACK = frozenset({"he", "she", "him", "her", "his", "hers", "they", "them", "their", "theirs", "it", "its",
                          "that", "those", "this", "these", "there", "then", "one", "ones", "else", "again", "same"})
_CONNECTIVES = ("and ", "but ", "so ", "also ", "what about ", "how about ")
_EARLIER_SHOWN = 3  # earlier exchanges in the prompt: the CPU model prefills about 57 tokens/s


class StandaloneQuestion(BaseModel):
    question: Text = Field(description="the question, understood without the conversation")


def _earlier_turns(history: list[Any]) -> list[tuple[str, str]]:
    """(question, answer) of each answered question on the thread, oldest first."""
    pairs, asked = [], ""
    for message in history:
        if isinstance(message, AIMessage) and asked:
            pairs.append((asked, _message_text(message).strip()))
        asked = _message_text(message).strip() if isinstance(message, HumanMessage) else ""
    return pairs


def refers_back(question: str) -> bool:
    """The question may lean on earlier turns: a referring word, a leading connective, or under four words."""
    words = _WORD.findall(question.lower())
    return len(words) < 4 or bool(set(words) & _REFERS_BACK) or (" ".join(words) + " ").startswith(_CONNECTIVES)


def rewrite_followup(ctx: Context, question: str, earlier: list[tuple[str, str]]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(the question to answer, the `rewrite_question` trace fields, usage): one short call when the
    question may refer back, else the question unchanged; an unusable reply keeps the question."""
    if not refers_back(question):
        return question, {"original": question, "rewritten": None, "skipped": "no word refers back"}, {}
    shown = "\n".join(f"Q: {q[:200]}\nA: {a[:200]}" for q, a in earlier[-_EARLIER_SHOWN:])
    user = render_prompt("common", "standalone_question", conversation=shown, question=question)
    res = call_structured(get_chat_model(ctx), messages(None, user), StandaloneQuestion, node="rewrite_question",
                          method=ctx.structured_method, max_tokens=80)
    rewritten = " ".join(res.value.question.split()) if res.value is not None else ""
    own = {w for w in _WORD.findall(question.lower()) if len(w) >= 3 and w not in _COMMON | _REFERS_BACK}
    problem = ("invalid reply" if res.value is None else "empty rewrite" if not rewritten or is_no_info(rewritten)
               else "the rewrite is too long" if len(rewritten) > 300
               else "the rewrite dropped the question's own words"
               if 2 * len(own & set(_WORD.findall(rewritten.lower()))) < len(own) else None)
    if problem is None:
        return rewritten, {"original": question, "rewritten": rewritten}, res.usage
    note = res.failure_note() if res.value is None else {"rewrite_reply": rewritten[:300]}
    return question, {"original": question, "rewritten": None, "fallback_rule": f"{problem}: the question as asked",
                      **note}, res.usage


def finish_question(state: MemoryState, runtime: Runtime[Context], method: str = "") -> dict[str, Any]:
    """Make the answer's dates absolute (`answer_absolute_dates`), append the answer to the thread's
    conversation (its supports in the message's metadata), and name the `method` and the question's `cost`."""
    answer = state.get("answer") or NO_INFO
    update: dict[str, Any] = {}
    ctx = runtime.context
    if ctx is not None and ctx.answer_absolute_dates and not is_no_info(answer):
        answer, note = absolute_answer_dates(ctx, state, answer)
        if note is not None:
            update = {"answer": answer, "trace": emit("absolute_dates", **note)}
    supports = list(state.get("supports") or [])
    reply = AIMessage(content=answer, response_metadata={"supports": supports},
                      additional_kwargs={"supports": supports})
    return {**update, "messages": [reply], "method": method, "cost": cost_summary(state.get("usage") or {})}


def wire_question_lifecycle(builder: StateGraph[Any, Any, Any, Any], first: str, last: str | list[str], method: str) -> None:
    """Add `start_question` (START -> start_question -> first) and `finish_question`
    (each of `last` -> finish_question -> END) to method `method`'s graph builder.

    Call it instead of `add_edge(START, first)` and the `add_edge(x, END)` edges. A router that
    can end the run (a conditional edge whose targets include END) must name "finish_question"
    instead of END, so every answer reaches the thread's `messages`.
    """
    schema = builder.state_schema

    def start(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
        return start_question(state, runtime, schema)

    def finish(state: MemoryState, runtime: Runtime[Context]) -> dict[str, Any]:
        return finish_question(state, runtime, method)

    start.__doc__, finish.__doc__ = start_question.__doc__, finish_question.__doc__
    builder.add_node("start_question", start)
    builder.add_node("finish_question", finish)
    builder.add_edge(START, "start_question")
    builder.add_edge("start_question", first)
    for node in [last] if isinstance(last, str) else last:
        builder.add_edge(node, "finish_question")
    builder.add_edge("finish_question", END)
