"""A tiny fake peer and a scripted answer model: the runner's plumbing without mem0 or LangMem installed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from benchmarks.peers.base import Found, Stored
from benchmarks.peers.llm import UsageMeter
from recollect.dialogue.models import Session
from recollect.llm.scripted import ScriptedChatModel
from recollect.llm.usage import call_record

_WORD = re.compile(r"[a-z0-9']+")


class FakePeer:
    """Keeps every turn as one memory (id `<namespace>/<turn id>`); search ranks by shared words.

    `llm_calls_per_session` records that many metered calls per ingested session, like a real peer's
    extraction calls; `fail_on` makes `search` raise for a question containing that text.
    """

    def __init__(self, name: str, store: Path, meter: UsageMeter, *, fail_on: str | None = None,
                 llm_calls_per_session: int = 1) -> None:
        self.name, self.store, self.meter = name, store, meter
        self.fail_on = fail_on
        self.llm_calls_per_session = llm_calls_per_session
        store.mkdir(parents=True, exist_ok=True)
        self.path = store / "memories.json"
        self.memories: dict[str, dict[str, str]] = (
            json.loads(self.path.read_text()) if self.path.is_file() else {})
        self.ingested: list[tuple[str, int]] = []
        self.searches: list[str] = []
        self.closed = False

    def ingest_session(self, namespace: str, session: Session) -> Stored:
        self.ingested.append((namespace, session.index))
        for _ in range(self.llm_calls_per_session):
            self.meter.record(call_record("fake", prompt_tokens=100, completion_tokens=10, latency_s=0.0,
                                          estimated=False, mg_tokens=110.0))
        events = []
        for turn in session.turns:
            mid = f"{namespace}/{turn.id}"
            self.memories.setdefault(namespace, {})[mid] = f"{turn.speaker}: {turn.full_text}"
            events.append((mid, "ADD"))
        self.path.write_text(json.dumps(self.memories))
        return Stored(events=events)

    def search(self, namespace: str, query: str, k: int) -> list[Found]:
        self.searches.append(query)
        if self.fail_on and self.fail_on in query:
            raise RuntimeError("search failed")
        words = set(_WORD.findall(query.lower()))
        mems = self.memories.get(namespace, {})
        ranked = sorted(mems.items(), key=lambda kv: -len(words & set(_WORD.findall(kv[1].lower()))))
        return [Found(mid, text) for mid, text in ranked[:k]]

    def count(self, namespace: str) -> int:
        return len(self.memories.get(namespace, {}))

    def close(self) -> None:
        self.closed = True


class Factory:
    """Builds fake peers and remembers them (the runner builds one per peer per run)."""

    def __init__(self, **kw: Any) -> None:
        self.kw = kw
        self.built: list[FakePeer] = []

    def __call__(self, name: str, store: Path, meter: UsageMeter) -> FakePeer:
        peer = FakePeer(name, store, meter, **self.kw)
        self.built.append(peer)
        return peer


ANSWERS = {"Ann's cat": "Pixel", "Berlin marathon": "yesterday", "balcony": "tomatoes, basil"}


def answer_model() -> ScriptedChatModel:
    """Answers from the memory lines it is shown: the scripted answer, citing the line that holds it."""

    def reply(messages: list[Any], kwargs: dict[str, Any]) -> Any:
        text = "\n".join(str(m.content) for m in messages)
        question = text.rsplit("Question:", 1)[-1]
        for frag, answer in ANSWERS.items():
            if frag in question:
                key = answer.split(",")[0].split()[-1] if answer != "yesterday" else "marathon"
                m = re.search(rf"\[(M\d+)\][^\n]*{re.escape(key)}", text, re.IGNORECASE)
                return {"answer": answer, "supports": [m[1]] if m else []}
        return {"answer": "No information available", "supports": []}

    return ScriptedChatModel(default=reply)
