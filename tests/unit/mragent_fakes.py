"""Scripted replies for MRAgent unit tests (no tests here): a fake ingestion model and a question-time dispatcher."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from app.config import Context
from app.ingest.pipeline import ingest_conversation
from app.llm.scripted import ScriptedChatModel
from tests.unit.helpers import make_conversation

SESSIONS = [
    [
        ("Ann", "I adopted a grey cat named Pixel yesterday."),
        ("Bob", "That is lovely, where did you find Pixel?"),
        ("Ann", "At the Riverside shelter near my flat."),
        ("Bob", "I started violin lessons with Rosa last week."),
        ("Ann", "Rosa is a great teacher."),
        ("Bob", "We practise every Tuesday evening."),
    ],
    [
        ("Bob", "I ran the Berlin marathon in four hours."),
        ("Ann", "Amazing, I planted tomatoes on my balcony."),
        ("Bob", "My grandfather carves wooden birds."),
        ("Ann", "Pixel sleeps on the balcony all day."),
    ],
]

_TURN = re.compile(r"^(D\d+:\d+) \| (\w+): (.*)$", re.M)
_SENT = re.compile(r"^(D\d+:\d+-\d+) \| (.*)$", re.M)


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[A-Za-z]+", text) if len(w) >= 4]


def rewrite_reply(prompt: str, tag_for: Callable[[str, str], str] | None = None,
                  time_for: Callable[[str], str] | None = None, drop: set[str] | None = None,
                  invent: bool = False) -> dict[str, Any]:
    sentences = []
    for tid, spk, text in _TURN.findall(prompt):
        if drop and tid in drop:
            continue
        tag = tag_for(tid, text) if tag_for else (words(text)[1].lower() if len(words(text)) > 1 else "chat")
        sentences.append({"origin": tid, "text": f"{spk} said: {text}", "tag": tag, "topics": ["t1"],
                          "time": time_for(tid) if time_for else ""})
    if invent:
        sentences.append({"origin": "D99:1", "text": "made up", "tag": "x", "topics": [], "time": ""})
    first = _TURN.findall(prompt)[0][1] if _TURN.findall(prompt) else "Ann"
    return {"conversation_time": "2023-05-01", "sentences": sentences, "topics": {"t1": "daily life", "t9": ""},
            "personal_facts": [{"person": first, "aspect": "pets", "text": f"{first} has a cat named Pixel",
                                "origin": _TURN.findall(prompt)[0][0]}]}


def keywords_reply(prompt: str, invent_id: bool = False) -> dict[str, Any]:
    items = [{"id": eid, "cues": [*words(text.split(":", 1)[-1])[:6], "unicorn"]} for eid, text in _SENT.findall(prompt)]
    if invent_id:
        items.append({"id": "D42:1-1", "cues": ["ghost"]})
    return {"sentences": items}


def ingest_model(**kw: Any) -> ScriptedChatModel:
    kw_rewrite = {k: v for k, v in kw.items() if k in ("tag_for", "time_for", "drop", "invent")}
    invent_id = kw.get("invent_id", False)

    def reply(messages: list, kwargs: dict[str, Any]) -> Any:
        prompt = str(messages[0].content)
        if prompt.startswith("Rewrite this conversation"):
            return rewrite_reply(prompt, **kw_rewrite)
        if prompt.startswith("For each sentence"):
            return keywords_reply(prompt, invent_id)
        raise AssertionError("unexpected ingestion prompt: " + prompt[:80])

    return ScriptedChatModel(default=reply)


def ingest(data_dir: str, sessions: list[list[tuple[str, str]]] | None = None, namespace: str = "ns",
           model: ScriptedChatModel | None = None, **ctx_kw: Any) -> tuple[Context, Any]:
    conv = make_conversation(sessions or SESSIONS, captions={"D1:1": "a grey cat on a sofa"})
    model = model or ingest_model()
    ctx = Context(data_dir=data_dir, chat_model=model, **ctx_kw)
    reports = ingest_conversation(conv, namespace, ctx, methods=["mragent"])
    return ctx, reports[-1]


class QuestionModel:
    """Question-time dispatcher: cues / pick / score / tag score / navigate (scripted queue) / final."""

    def __init__(self, cues: Any = None, navigate: list[Any] | None = None, navigate_default: Any = None,
                 pick: Any = None, score: Any = None, tag_score: Any = None, final: Any = None) -> None:
        self.cues = cues if cues is not None else {"time_window": "", "cues": [{"cue": "Pixel", "alternatives": []}]}
        self.navigate = list(navigate or [])
        self.navigate_default = navigate_default
        self.pick, self.score, self.tag_score = pick, score, tag_score
        self.final = final if final is not None else {"answer": "Pixel", "supports": [], "confidence": 0.5}
        self.kinds: list[str] = []
        self.model = ScriptedChatModel(default=self.reply)

    def reply(self, messages: list, kwargs: dict[str, Any]) -> Any:
        prompt = str(messages[0].content)
        kind, value = self._dispatch(prompt)
        self.kinds.append(kind)
        if callable(value) and not isinstance(value, dict):
            value = value(len([k for k in self.kinds if k == kind]), prompt)
        return value

    def _dispatch(self, prompt: str) -> tuple[str, Any]:
        if prompt.startswith("Extract search cues"):
            return "cues", self.cues
        if "Pick up to" in prompt:
            return "pick", self.pick
        if "Score how useful" in prompt:
            return "score", self.score
        if "Score how likely each tag" in prompt:
            return "tag_score", self.tag_score
        if prompt.startswith("You answer a question about a long conversation"):
            return "navigate", self.navigate.pop(0) if self.navigate else self.navigate_default
        if prompt.startswith("Answer the question from the memories"):
            return "final", self.final
        raise AssertionError("unexpected prompt: " + prompt[:80])
