"""Scripted replies for MGRetrieval unit tests (no tests here): the fake aux model of ingestion.

It answers p_s1 (keyword extraction) and p_s2 (vocabulary matching) in the format the request's
schema asks for (`mg_ingest_format`: the compact schemas are titled `MGKeywords` / `MGMatches`, the
json ones have a `turns` / `matches` property), so one script drives either format.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import ScriptedChatModel
from tests.helpers import make_conversation

ID_LINE = re.compile(r"^\[(D\d+:\d+)\]", re.M)
PAIR = re.compile(r"^\d+\. (.+?) -> (.+)$", re.M)
# The compact format numbers turns and shortlist entries in the prompt.
NUMBERED_TURN = re.compile(r"^\[(\d+)\] ", re.M)
SESSION_OF_DATE = re.compile(r"on (\d+) May, 2023")  # make_conversation dates session s "… on s May, 2023"
NUMBERED_ENTRY = re.compile(r"(\d+)\) ([^,]+)")


def schema_of(kwargs: dict[str, Any]) -> dict[str, Any]:
    return (kwargs.get("response_format") or {}).get("schema", {})


def schema_props(kwargs: dict[str, Any]) -> set[str]:
    return set(schema_of(kwargs).get("properties", {}))


def call_kind(kwargs: dict[str, Any]) -> str:
    """`turns` for p_s1 and `matches` for p_s2, in either format (compact schemas are titled); `?` otherwise."""
    schema = schema_of(kwargs)
    title = schema.get("title")
    if title == "MGKeywords" or "turns" in schema.get("properties", {}):
        return "turns"
    if title == "MGMatches" or "matches" in schema.get("properties", {}):
        return "matches"
    return "?"


class FakeAux:
    """Replies by call kind: extraction from KEYWORDS, matching from `matches` (keyword → entry).

    It answers in the format the request's schema asks for, so the same script drives both
    `mg_ingest_format`s; `shape="json"` always answers in the keyed json shape (a model ignoring the
    compact instruction). A compact turn number is mapped back to its id through the session date
    (make_conversation's `D<s>:<k>` ids, one extraction batch per session). `other` answers every
    call that is neither (question time, when one model serves both); without it such a call fails.
    """

    def __init__(self, keywords: dict[str, list[str]], matches: dict[str, str | None] | None = None,
                 shape: str = "auto", other: Callable[[list[Any], dict[str, Any]], Any] | None = None) -> None:
        self.keywords = keywords
        self.matches = matches or {}
        self.shape = shape
        self.other = other
        self.model = ScriptedChatModel(default=self.reply)

    def reply(self, messages: list[Any], kwargs: dict[str, Any]) -> Any:
        text = "\n".join(str(m.content) for m in messages)
        kind = call_kind(kwargs)
        compact = schema_of(kwargs).get("title") in ("MGKeywords", "MGMatches") and self.shape != "json"
        if kind == "turns":
            ids = ID_LINE.findall(text)
            if not ids:  # the compact prompt: [1], [2], … under the session date
                session = SESSION_OF_DATE.search(text).group(1)  # type: ignore[union-attr]
                ids = [f"D{session}:{n}" for n in NUMBERED_TURN.findall(text)]
            if compact:
                return {str(n): ", ".join(self.keywords.get(t, [])) for n, t in enumerate(ids, 1)}
            return {"turns": [{"id": t, "keywords": self.keywords.get(t, [])} for t in ids]}
        if kind == "matches":
            pairs = PAIR.findall(text)
            if compact:
                out = {}
                for n, (kw, listing) in enumerate(pairs, 1):
                    entries = [e.strip() for _, e in NUMBERED_ENTRY.findall(listing)]
                    want = self.matches.get(kw)
                    # An entry outside the shortlist can only be named by a number out of range.
                    out[str(n)] = 0 if want is None else (entries.index(want) + 1 if want in entries else len(entries) + 1)
                return out
            return {"matches": [{"keyword": k, "entry": self.matches.get(k)} for k, _ in pairs]}
        if self.other is not None:
            return self.other(messages, kwargs)
        raise AssertionError(f"unexpected call: {schema_props(kwargs)}")

    def count(self, prop: str) -> int:
        return sum(1 for c in self.model.calls if call_kind(c["kwargs"]) == prop)


def ingest_scripted(data_dir: str, sessions: list[list[tuple[str, str]]], aux: FakeAux, namespace: str = "ns",
                    **ctx_kw: Any) -> Any:
    """Ingest `sessions` for MGRetrieval with `aux` as the model, and check that ingestion took its
    scripted replies: no call failed and no turn got the rule-based fallback keywords. Returns the
    build report."""
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=aux.model, **ctx_kw)
    report = ingest_conversation(make_conversation(sessions), namespace, ctx, methods=["mgretrieval"])[-1]
    assert report.fallbacks == [], report.fallbacks
    return report
