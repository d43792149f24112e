"""MemR3's router: the one LLM decision per iteration (retrieve, reflect or answer), with the
evidence–gap tracker it rewrites (README.md in this folder, "Nodes").

Budgets (iteration cap, retrieval-opportunity check) are enforced here, in code, and announced to
the model through the decision directive and the JSON schema's enum.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from recollect.dialogue.turn_ids import TurnIdMatcher
from recollect.graphs.memr3.layout import router_messages, snippet_lines
from recollect.graphs.memr3.nodes import opportunity
from recollect.graphs.memr3.settings import MemR3Context
from recollect.graphs.memr3.state import MemR3State
from recollect.llm.models import get_chat_model
from recollect.llm.structured import call_structured, resolve_method
from recollect.prompts import load_prompt, render_prompt
from recollect.steps import bullets
from recollect.trace import emit

DECISIONS = ("retrieve", "reflect", "answer")
# Dropped evidence bullets carried over per router call (memr3_keep_cited_evidence): the schema lets
# the router write 6, so the tracker stays within about twice the spec's size.
MAX_CARRIED_EVIDENCE = 6


def _list_cap(items: int, chars: int) -> dict[str, Any]:
    return {"maxItems": items, "items": {"type": "string", "maxLength": chars}}


def _cap_string(schema: dict[str, Any], chars: int) -> None:
    """maxLength on the string branch of an optional string (a grammar ignores it beside `anyOf`)."""
    for branch in schema.get("anyOf", [schema]):
        if branch.get("type") == "string":
            branch["maxLength"] = chars


def _text_cap(chars: int) -> Any:
    """A field's json_schema_extra that caps its string branch at `chars`."""
    return lambda schema: _cap_string(schema, chars)


class RouterReply(BaseModel):
    """The router's JSON. Lenient on shape: the graph, not the schema, enforces decisions."""

    # The length caps only shape the schema sent to the endpoint (a grammar on llama.cpp): a small model
    # otherwise fills an optional field it was told to skip with a repeating loop until max_tokens
    # (measured: a 400-token "reasoning" loop on an answer decision, 84 s of CPU time). Validation
    # does not enforce them.
    evidence: list[str] = Field(default_factory=list, json_schema_extra=_list_cap(6, 300))
    gaps: list[str] = Field(default_factory=list, json_schema_extra=_list_cap(6, 200))
    decision: str
    retrieval_query: str | None = Field(default=None, json_schema_extra=_text_cap(200))
    detailed_answer: str | None = Field(default=None, json_schema_extra=_text_cap(300))
    reasoning: str | None = Field(default=None, json_schema_extra=_text_cap(300))

    @field_validator("evidence", "gaps", mode="before")
    @classmethod
    def _lines(cls, v: Any) -> Any:
        if v is None:
            return []
        if isinstance(v, str):
            v = v.splitlines()
        if isinstance(v, list):
            out = [str(x).strip().lstrip("-• ").strip() for x in v if x is not None]
            return [x for x in out if x and x.lower() not in ("none", "n/a", "[]")]
        return v

    @field_validator("decision", mode="before")
    @classmethod
    def _decision(cls, v: Any) -> Any:
        return "" if v is None else str(v).strip().lower()

    @field_validator("retrieval_query", "detailed_answer", "reasoning", mode="before")
    @classmethod
    def _opt_text(cls, v: Any) -> Any:
        if v is None or isinstance(v, str):
            return v
        return str(v)


# The properties a reply must write, in this order (memr3_require_tracker): a grammar built from the schema
# emits required properties first, so the decision comes after the lists it should rest on.
TRACKER_FIRST = ("evidence", "gaps", "decision")


# With the lists required, the 1.5B model filled them with whole turn lines (date header included): six
# 300-character bullets ran past the call's 400 tokens, so the reply was cut off and asked again (measured on
# the decisive eval: 2 of 3 router calls of a question ended at the length limit, 50 s of decoding each).
# Required lists get these tighter caps, which together stay well under the call's completion budget.
REQUIRED_EVIDENCE_CAP = (4, 160)  # items, characters each
REQUIRED_GAPS_CAP = (3, 100)
# memr3_answer_from_router: the draft a router that may answer must write after its decision; short, since
# with that setting it can be the final answer ("" when the decision is not answer).
REQUIRED_DRAFT_CHARS = 120


# memr3_reply_bounds: the router's reply is decoded at about 12 tokens a second on a CPU, and on the decisive rows
# it was most of MemR3's generated tokens (about 220 a router call): bullets that copy a whole turn, date header
# included, and long drafts. These caps (items, characters each) bound what a grammar lets it write.
BOUNDED_EVIDENCE_CAP = (6, 160)
BOUNDED_GAPS_CAP = (3, 100)
BOUNDED_TEXT_CHARS = {"retrieval_query": 120, "detailed_answer": 160, "reasoning": 200}



def _bound(props: dict[str, Any]) -> None:
    for name, (items, chars) in (("evidence", BOUNDED_EVIDENCE_CAP), ("gaps", BOUNDED_GAPS_CAP)):
        props[name]["maxItems"] = min(items, props[name]["maxItems"])
        props[name]["items"]["maxLength"] = min(chars, props[name]["items"]["maxLength"])
    for name, chars in BOUNDED_TEXT_CHARS.items():
        _cap_string(props[name], chars)


def _require(names: tuple[str, ...], bounded: bool = False) -> Any:
    def extra(schema: dict[str, Any]) -> None:
        schema["required"] = list(names)
        props = schema["properties"]
        if bounded:
            _bound(props)
        for name, (items, chars) in (("evidence", REQUIRED_EVIDENCE_CAP), ("gaps", REQUIRED_GAPS_CAP)):
            if name in names:
                props[name]["maxItems"] = items
                props[name]["items"]["maxLength"] = chars
        if "detailed_answer" in names:
            _cap_string(props["detailed_answer"], REQUIRED_DRAFT_CHARS)

    return extra


# memr3_decision_fields: the one free-text field each decision's step reads; the others are never read.
DECISION_FIELD = {"retrieve": "retrieval_query", "reflect": "reasoning", "answer": "detailed_answer"}


def _one_branch_per_decision(schema: dict[str, Any]) -> None:
    """Replace an object schema by one branch per allowed decision, each with the decision as a constant, the
    tracker's lists and only that decision's own text field (memr3_decision_fields). A grammar built from it
    lets the reply write no field its decision does not read; the required properties stay as they were."""
    props = schema["properties"]
    required = list(schema.get("required", ["decision"]))
    branches = []
    for decision in props["decision"]["enum"]:
        names = ["evidence", "gaps", "decision", DECISION_FIELD[decision]]
        branch_props = {n: ({"const": decision} if n == "decision" else props[n]) for n in names}
        branches.append({"type": "object", "properties": branch_props,
                         "required": [n for n in required if n in branch_props], "additionalProperties": False})
    title = schema.get("title", "RouterDecision")
    schema.clear()
    schema.update({"title": title, "anyOf": branches})


def required_fields(allowed: tuple[str, ...], require_tracker: bool, require_draft: bool) -> tuple[str, ...]:
    """The properties a router reply must write, in order; ("decision",) is the schema's own default."""
    names = TRACKER_FIRST if require_tracker else ("decision",)
    return names + (("detailed_answer",) if require_draft and "answer" in allowed else ())


def router_schema(allowed: tuple[str, ...], require_tracker: bool = False, require_draft: bool = False,
                  bounded: bool = False, per_decision: bool = False) -> type[RouterReply]:
    """The reply model whose JSON schema lists only the allowed decisions (sent to the endpoint); `bounded`:
    the tighter length caps of memr3_reply_bounds; `per_decision`: one branch per decision with only the text
    field it reads (memr3_decision_fields). Validation stays the lenient RouterReply's either way."""
    names = required_fields(allowed, require_tracker, require_draft)
    require = _require(names, bounded) if names != ("decision",) or bounded else None

    def extra(schema: dict[str, Any]) -> None:
        if require is not None:
            require(schema)
        if per_decision:
            _one_branch_per_decision(schema)

    return create_model(
        "RouterDecision",
        __base__=RouterReply,
        __config__=ConfigDict(json_schema_extra=extra) if require is not None or per_decision else None,
        decision=(str, Field(json_schema_extra={"enum": list(allowed)})),
    )


_SCHEMAS = {(a, req, draft, bounded, per): router_schema(a, req, draft, bounded, per)
            for a in [DECISIONS, *((d,) for d in DECISIONS)]
            for req in (False, True) for draft in (False, True) for bounded in (False, True) for per in (False, True)}


def per_decision_schema(ctx: MemR3Context, model: Any) -> bool:
    """memr3_decision_fields applies where the reply is held to the schema by a grammar (llama.cpp's json_object
    with a schema): a hosted endpoint's structured output may refuse a schema whose root is a union."""
    return ctx.memr3_decision_fields and resolve_method(model, ctx.structured_method) == "json_object_schema"


def _skipped_budget_call(state: MemR3State, iteration: int) -> dict[str, Any]:
    """The budget call made without the model (memr3_skip_forced_router): its decision is forced to answer,
    and the answer call reads the latest turns and the evidence so far itself. Evidence, gaps and any draft
    stay as they are; the trace says the call was skipped and why."""
    evidence = list(state.get("evidence") or [])
    gaps = list(state.get("gaps") or [])
    return {
        "iteration": iteration + 1,
        "memr3_decision": "answer",
        "memr3_forced": None,
        "memr3_decision_forced": True,
        "memr3_router_fallback": False,
        "memr3_reasoning": None,
        "memr3_reflect_streak": 0,
        "memr3_exchange": None,
        "memr3_tracker": [{"iteration": iteration + 1, "decision": "answer", "evidence": evidence, "gaps": gaps}],
        "trace": emit("router", iteration=iteration + 1, decision="answer", forced="answer", model_decision=None,
                      skipped_call="router", skip_reason="the iteration budget forces answer and the answer call "
                      "reads the same latest turns (memr3_skip_forced_router)", n_evidence=len(evidence),
                      n_gaps=len(gaps)),
    }


_WORD = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=1)
def _query_instruction_words() -> frozenset[str]:
    """The words of the reply format's description of `retrieval_query` (router_task.md, router_system.md)."""
    text = load_prompt("memr3", "router_task").lower()
    start = text.find('"retrieval_query":')
    return frozenset(_WORD.findall(text[start:text.find('",', start)])) if start >= 0 else frozenset()


def copied_instruction(query: str) -> bool:
    """Whether a refinement query is the format's own description copied back (the 1.5B model often writes
    "5-15 words naming the missing fact, different from the prior query"): appended to the question, it
    would pull the search towards those words. Most of its words, and at least four, from the description."""
    words = set(_WORD.findall(query.lower()))
    hits = words & _query_instruction_words()
    return len(hits) >= 4 and len(hits) >= 0.7 * len(words)


def _carry_cited(old: list[str], new: list[str], masks: list[str]) -> list[str]:
    """Old bullets citing a shown turn that no new bullet cites (the router dropped them), newest kept."""
    matcher = TurnIdMatcher(masks)
    covered = set(matcher.find(new))
    carried = [b for b in old if b not in new and (ids := matcher.find(b)) and not set(ids) <= covered]
    return carried[:MAX_CARRIED_EVIDENCE]


def exchange(ctx: MemR3Context, sent: list[BaseMessage], reply: str, carried: list[str]) -> dict[str, Any] | None:
    """The router call the answer call continues (memr3_answer_continues): its messages' text, its reply as
    the model wrote it (so the server finds those tokens in its cache), and the evidence carried over beside
    it (memr3_keep_cited_evidence), which the reply does not show. None when the setting is off or the
    prefix layout is on (that layout shares its own prefix), or when the answer call would not read both the
    turns and the notes that the exchange holds."""
    if not ctx.memr3_answer_continues or ctx.memr3_prefix_layout or ctx.memr3_answer_snippets == "never" \
            or ctx.memr3_answer_notes != "text":
        return None
    system = next((str(m.content) for m in sent if isinstance(m, SystemMessage)), "")
    user = next((str(m.content) for m in sent if isinstance(m, HumanMessage)), "")
    return {"system": system, "user": user, "reply": reply, "carried": list(carried)}


def router(state: MemR3State, runtime: Runtime[MemR3Context]) -> dict[str, Any]:
    ctx = runtime.context
    iteration = state.get("iteration", 0)
    budget_call = iteration + 1 >= ctx.memr3_max_iterations
    forced = "answer" if budget_call else state.get("memr3_forced")
    allowed = (forced,) if forced else DECISIONS
    directive = (
        render_prompt("memr3", "directive_forced", decision=forced) if forced
        else load_prompt("memr3", "directive_normal")
    )
    # memr3_stable_router_system: the system message keeps the normal directive, the forced one ends the user message
    stable = ctx.memr3_stable_router_system and not ctx.memr3_prefix_layout
    forced_note = directive if stable and forced else None
    if stable:
        directive = load_prompt("memr3", "directive_normal")
    if budget_call and ctx.memr3_skip_forced_router and ctx.memr3_answer_snippets in ("always", "all"):
        return _skipped_budget_call(state, iteration)
    queries = state.get("memr3_queries") or []
    values = {
        "question": state["question"],
        "evidence": bullets(state.get("evidence") or []),
        "gaps": bullets(state.get("gaps") or []),
        "snippets": snippet_lines(state.get("memr3_snippets") or []),
        "reasoning": state.get("memr3_reasoning") or "(none)",
        "prior_query": queries[-1] if queries else "(none)",
    }
    sent = router_messages(ctx, directive, values, forced_note)
    model = get_chat_model(ctx)
    res = call_structured(
        model, sent,
        _SCHEMAS[allowed, ctx.memr3_require_tracker, ctx.memr3_answer_from_router, ctx.memr3_reply_bounds,
                 per_decision_schema(ctx, model)],
        node="router",
        method=ctx.structured_method, max_tokens=400,
    )

    evidence = list(state.get("evidence") or [])
    gaps = list(state.get("gaps") or [])
    reply = res.value
    note: dict[str, Any] = {}
    carried: list[str] = []
    if reply is not None:
        if ctx.memr3_keep_cited_evidence:
            carried = _carry_cited(evidence, reply.evidence, state.get("masks") or [])
        evidence, gaps = reply.evidence + carried, reply.gaps
        decision = reply.decision if reply.decision in DECISIONS else "reflect"
        if reply.decision not in DECISIONS:
            note["unknown_decision"] = reply.decision
    else:
        decision = "retrieve" if opportunity(state, ctx) else "answer"
        note = res.failure_note()
    if forced:  # on the budget call `forced` is "answer", so the iteration cap needs no second check
        decision = forced

    update: dict[str, Any] = {
        "iteration": iteration + 1,
        "evidence": evidence,
        "gaps": gaps,
        "memr3_decision": decision,
        "memr3_forced": None,
        "memr3_decision_forced": forced is not None,
        "memr3_router_fallback": reply is None,
        "memr3_tracker": [
            {"iteration": iteration + 1, "decision": decision, "evidence": evidence, "gaps": gaps}
        ],
        "usage": res.usage,
    }
    if decision == "retrieve":
        update["query"] = (reply.retrieval_query or "").strip() if reply else ""
        if update["query"] and copied_instruction(update["query"]):
            note["copied_instruction_query"] = update["query"]
            update["query"] = ""  # the question alone is searched, as on the first retrieval
    if decision == "answer":
        update["draft_answer"] = (reply.detailed_answer or "").strip() if reply else state.get("draft_answer")
    update["memr3_exchange"] = exchange(ctx, sent, res.raw, carried) \
        if decision == "answer" and reply is not None and res.attempts == 1 else None
    if decision == "reflect":
        update["memr3_reasoning"] = (reply.reasoning or "").strip() if reply else None
        update["memr3_reflect_streak"] = state.get("memr3_reflect_streak", 0) + 1
    else:
        update["memr3_reasoning"] = None
        update["memr3_reflect_streak"] = 0
    update["trace"] = emit(
        "router",
        iteration=iteration + 1,
        decision=decision,
        forced=forced,
        model_decision=reply.decision if reply else None,
        query=update.get("query"),
        evidence=evidence,
        gaps=gaps,
        n_evidence=len(evidence),
        n_gaps=len(gaps),
        carried_evidence=carried,
        **note,
    )
    return update
