"""Scripted replies for MRAgent unit tests (no tests here): a fake ingestion model and a question-time dispatcher."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from recollect.graphs.registry import AllMethodsContext
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import ScriptedChatModel
from tests.helpers import make_conversation

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
# The compact prompts (mra_ingest_format "compact" / "compact_merged") number turns and sentences.
_NUM_TURN = re.compile(r"^(\d+) \| (\w+): (.*)$", re.M)
_NUM_SENT = re.compile(r"^(\d+) \| (.*)$", re.M)


TURN_PROMPT = "Index this conversation session"  # call A with mra_ingest_sentences="turn"


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[A-Za-z]+", text) if len(w) >= 4]


def prompt_turns(prompt: str, sessions: Any = None) -> list[tuple[str, str, str, str]]:
    """(turn id, reference the reply uses, speaker, text) per turn line of a rewrite prompt.

    A json prompt shows turn ids; a compact one shows turn numbers, resolved against `sessions` (the
    ingested conversation's, see `ingest`) so callbacks still get ids like "D1:3"."""
    found = _TURN.findall(prompt)
    if found:
        return [(tid, tid, spk, text) for tid, spk, text in found]
    lines = _NUM_TURN.findall(prompt)
    if not lines:
        return []
    for session in sessions or ():
        by_index = {str(t.index): t for t in session.turns}
        if all(n in by_index and (by_index[n].speaker, by_index[n].full_text) == (spk, text) for n, spk, text in lines):
            return [(by_index[n].id, n, spk, text) for n, spk, text in lines]
    raise AssertionError("compact rewrite prompt whose turns match no ingested session")


def rewrite_content(turns: list[tuple[str, str, str, str]], tag_for: Callable[[str, str], str] | None = None,
                    time_for: Callable[[str], str] | None = None, drop: set[str] | None = None,
                    invent: bool = False) -> dict[str, Any]:
    """What the fake rewrite says, format-free: sentences (ref, text, tag, topic numbers, time, cues),
    topics, facts. `invent` adds a sentence for a turn that is not in the window."""
    sentences = []
    for tid, ref, spk, text in turns:
        if drop and tid in drop:
            continue
        tag = tag_for(tid, text) if tag_for else (words(text)[1].lower() if len(words(text)) > 1 else "chat")
        rewritten = f"{spk} said: {text}"
        sentences.append((ref, rewritten, tag, [1], time_for(tid) if time_for else "",
                          [*words(text)[:6], "unicorn"]))
    if invent:
        sentences.append(("D99:1", "made up", "x", [], "", []))  # a turn id in either format
    first_ref, first_spk = (turns[0][1], turns[0][2]) if turns else ("D1:1", "Ann")
    return {"sentences": sentences, "topics": ["daily life", ""], "n_turns": len(turns),
            "facts": [(first_ref, first_spk, "pets", f"{first_spk} has a cat named Pixel")]}


def json_rewrite(content: dict[str, Any], conversation_time: str = "2023-05-01") -> dict[str, Any]:
    """The content as the spec's keyed call-A reply (mra_ingest_format="json")."""
    return {"conversation_time": conversation_time,
            "sentences": [{"origin": ref, "text": text, "tag": tag, "topics": [f"t{n}" for n in topics], "time": time}
                          for ref, text, tag, topics, time, _ in content["sentences"]],
            "topics": {f"t{i}": t for i, t in enumerate(content["topics"], start=1)},
            "personal_facts": [{"person": p, "aspect": a, "text": f, "origin": ref} for ref, p, a, f in content["facts"]]}


def compact_rewrite(content: dict[str, Any], merged: bool = False) -> dict[str, Any]:
    """The content as a compact call-A reply (arrays; with `merged`, each sentence ends with its cues)."""
    def number(ref: str) -> Any:
        return int(ref) if ref.isdigit() else ref

    return {"topics": list(content["topics"]),
            "sentences": [[number(ref), text, tag, topics, time, *([cues] if merged else [])]
                          for ref, text, tag, topics, time, cues in content["sentences"]],
            "facts": [[number(ref), p, a, f] for ref, p, a, f in content["facts"]]}


def turn_rows(content: dict[str, Any], derived: bool = False) -> dict[str, Any]:
    """The content as call A's reply with mra_ingest_sentences="turn": a row per turn in order, [tag, topics],
    no sentence text (a dropped turn's row is the last row again), the dated turns under `times`; `derived`
    (mra_turn_labels): a row is the topic numbers alone, and no `times`."""
    def number(ref: str) -> Any:
        return int(ref) if ref.isdigit() else ref

    if derived:
        rows = [[int(t) for t in topics] or [1] for _, _, _, topics, _, _ in content["sentences"]]
        return {"topics": list(content["topics"]), "turns": rows + rows[-1:] * (content["n_turns"] - len(rows)),
                "facts": [[number(ref), p, a, f] for ref, p, a, f in content["facts"]]}
    rows = [[tag, topics] for _, _, tag, topics, _, _ in content["sentences"]]
    return {"topics": list(content["topics"]),
            "turns": rows + rows[-1:] * (content["n_turns"] - len(rows)),
            "times": [[number(ref), time] for ref, _, _, _, time, _ in content["sentences"] if time],
            "facts": [[number(ref), p, a, f] for ref, p, a, f in content["facts"]]}


def rewrite_reply(prompt: str, tag_for: Callable[[str, str], str] | None = None,
                  time_for: Callable[[str], str] | None = None, drop: set[str] | None = None,
                  invent: bool = False, sessions: Any = None) -> dict[str, Any]:
    """A call-A reply in the format the prompt asks for."""
    content = rewrite_content(prompt_turns(prompt, sessions), tag_for, time_for, drop, invent)
    if _TURN.search(prompt):
        return json_rewrite(content)
    if prompt.startswith(TURN_PROMPT):
        return turn_rows(content, derived='"turns": [[<topic numbers>]]' in prompt)
    return compact_rewrite(content, merged="each with its keywords" in prompt)


def keywords_reply(prompt: str, invent_id: bool = False) -> dict[str, Any]:
    """A call-B reply in the format the prompt asks for: the sentence's words plus one invented cue."""
    if _SENT.search(prompt):
        items = [{"id": eid, "cues": [*words(text.split(":", 1)[-1])[:6], "unicorn"]} for eid, text in _SENT.findall(prompt)]
        if invent_id:
            items.append({"id": "D42:1-1", "cues": ["ghost"]})
        return {"sentences": items}
    rows = [[n, *words(text.split(":", 1)[-1])[:6], "unicorn"] for n, text in _NUM_SENT.findall(prompt)]
    if invent_id:
        rows.append(["D42:1-1", "ghost"])
    return {"cues": rows}


class IngestFake:
    """The scripted ingestion model's reply function; `ingest` tells it the conversation's sessions."""

    def __init__(self, invent_id: bool = False, **rewrite_kw: Any) -> None:
        self.invent_id = invent_id
        self.rewrite_kw = rewrite_kw
        self.sessions: Any = None

    def __call__(self, messages: list, kwargs: dict[str, Any]) -> Any:
        prompt = str(messages[0].content)
        if prompt.startswith(("Rewrite this conversation", TURN_PROMPT)):
            return rewrite_reply(prompt, sessions=self.sessions, **self.rewrite_kw)
        if prompt.startswith("For each sentence"):
            return keywords_reply(prompt, self.invent_id)
        raise AssertionError("unexpected ingestion prompt: " + prompt[:80])


def ingest_model(**kw: Any) -> ScriptedChatModel:
    kw_rewrite = {k: v for k, v in kw.items() if k in ("tag_for", "time_for", "drop", "invent")}
    return ScriptedChatModel(default=IngestFake(invent_id=kw.get("invent_id", False), **kw_rewrite))


# the question's cues from the scripted cue call and the seed from the cue paths alone, as the paper; the
# lexical cues and the ranked seed turns have their own tests (test_question_cues.py)
PAPER_LOOP = {"mra_max_rounds": 8, "mra_tool_protocol": "auto", "mra_answer_continues": False,
              "mra_question_cues": "llm", "mra_seed_ranked_turns": 0, "mra_final_answer_tokens": 0,
              "mra_answer_rewrite": True}


def ingest(data_dir: str, sessions: list[list[tuple[str, str]]] | None = None, namespace: str = "ns",
           model: ScriptedChatModel | None = None, **ctx_kw: Any) -> tuple[AllMethodsContext, Any]:
    conv = make_conversation(sessions or SESSIONS, captions={"D1:1": "a grey cat on a sofa"})
    model = model or ingest_model()
    if isinstance(model.default, IngestFake):
        model.default.sessions = conv.sessions
    # The acceptance behaviours are call B's (the spec's cue extraction) over the sentences call A writes;
    # lexical cues (test_compact.py) and the turns as sentences (test_sentences.py) have their own tests.
    ctx_kw.setdefault("mra_ingest_cues", "llm")
    ctx_kw.setdefault("mra_ingest_sentences", "llm")
    # The loop behaviours are the paper's loop (8 rounds, tools bound, the final call's own prompt, its answer
    # rewritten into a span); the defaults that change it have their own tests (test_answer_continues.py,
    # test_final_answer.py).
    for name, value in PAPER_LOOP.items():
        ctx_kw.setdefault(name, value)
    ctx = AllMethodsContext(data_dir=data_dir, chat_model=model, **ctx_kw)
    reports = ingest_conversation(conv, namespace, ctx, methods=["mragent"])
    return ctx, reports[-1]


def draft_of(prompt: str) -> str:
    """The draft answer a rewrite prompt shows."""
    found = re.search(r"^Draft answer: (.*)$", prompt, re.M)
    return found[1].strip() if found else ""


CONTINUED = "No more tool calls"  # prompts/mragent/final_continue.md
TURNS_ANSWER = "Answer the question about a past conversation using only the memories"  # prompts/baselines/answer.md
TURNS_CONTINUED = "Stop calling tools."  # prompts/final_answer/mragent_continue.md (mra_final_answer_continues)


class QuestionModel:
    """Question-time dispatcher: cues / pick / score / tag score / navigate (scripted queue) / final."""

    def __init__(self, cues: Any = None, navigate: list[Any] | None = None, navigate_default: Any = None,
                 pick: Any = None, score: Any = None, tag_score: Any = None, final: Any = None,
                 rewrite: Any = None, turns: Any = None) -> None:
        self.cues = cues if cues is not None else {"time_window": "", "cues": [{"cue": "Pixel", "alternatives": []}]}
        self.navigate = list(navigate or [])
        self.navigate_default = navigate_default
        self.pick, self.score, self.tag_score = pick, score, tag_score
        self.final = final if final is not None else {"answer": "Pixel", "supports": [], "confidence": 0.5}
        # The answer rewrite (mra_answer_rewrite) keeps the draft unless a test scripts it.
        self.rewrite = rewrite if rewrite is not None else (lambda n, prompt: {"answer": draft_of(prompt)})
        # the final answer from turns (mra_final_answer_tokens), in the baselines' answer prompt
        self.turns = turns if turns is not None else {"answer": "Pixel", "supports": []}
        self.kinds: list[str] = []
        self.model = ScriptedChatModel(default=self.reply)

    def reply(self, messages: list, kwargs: dict[str, Any]) -> Any:
        prompt = str(messages[0].content)
        # a continued final call (mra_answer_continues, mra_final_answer_continues) resends the navigate exchange,
        # then its own message
        prompt = next((str(m.content) for m in messages[1:] if str(m.content).startswith((CONTINUED, TURNS_CONTINUED))),
                      prompt)
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
        if prompt.startswith(("Answer the question from the memories", CONTINUED)):
            return "final", self.final
        if prompt.startswith("Rewrite a draft answer"):
            return "rewrite", self.rewrite
        if prompt.startswith((TURNS_ANSWER, TURNS_CONTINUED)):
            return "turns", self.turns
        raise AssertionError("unexpected prompt: " + prompt[:80])
