"""MRAgent's ingestion without a model: each session's call-A completion cap and an estimate of the tokens
a model generates for it, per ingestion setting, on the made-up sample dialogue.

    python benchmarks/mragent_ingest_tokens.py [--out benchmarks/reports/speed]
    python benchmarks/mragent_ingest_tokens.py --data locomo_dev.json --conv conv-26 --sessions 3 --out /tmp/x

With `--data`, the first `--sessions` sessions of conversation `--conv` of that file (read at run time; the
report holds numbers only) instead of the sample, for the default and the model-written sentences.

No model runs. The sample dialogue (examples/sample_dialogue.json) is ingested by MRAgent with a scripted
model that records every request and answers each with a *plausible* reply in the shape asked for: a
sentence per turn that restates the turn with its speaker's name for the first person, a two-word tag,
the first topic, "" for the date, three topics and a fact for every third turn. Every setting gets the
same tags, topics and facts, so the estimates differ only by what a setting asks the model to write.
`estimated_completion_tokens` is that reply's length in characters / 4, rounded up: an estimate of
what a model writes, not a measurement. `completion_cap` is the max_tokens the request carries.

Also importable: `record(settings)` returns the ingestion requests (tests/methods/mragent/test_sentences.py
checks with it that the settings that keep the model's sentences send the requests they sent before).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sys
import tempfile
from dataclasses import fields
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("RECOLLECT_EMBEDDER", "hash")  # deterministic, no model files
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from benchmarks.prefix_reuse import request_digest, request_record  # noqa: E402
from recollect.dialogue.loaders import load_conversation  # noqa: E402
from recollect.graphs.registry import AllMethodsContext  # noqa: E402
from recollect.ingestion import ingest_conversation  # noqa: E402
from recollect.llm.scripted import ScriptedChatModel  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "sample_dialogue.json"
# The settings compared: the default and the model-written sentences it replaced, each cue source and format.
RUNS: dict[str, dict[str, Any]] = {
    "turn sentences, tags and dates by the model": {"mra_turn_labels": "llm"},
    "compact, sentences llm, cues lexical": {"mra_ingest_sentences": "llm"},
    "compact, sentences llm, cues llm": {"mra_ingest_sentences": "llm", "mra_ingest_cues": "llm"},
    "compact_merged": {"mra_ingest_format": "compact_merged"},
    "json, cues llm (the spec)": {"mra_ingest_format": "json", "mra_ingest_cues": "llm"},
    "profile paper": {"profile": "paper"},
}
# Call A's turn lines: `D1:3 | Ann: text` (json) or `3 | Ann: text` (the compact formats); call B's sentences.
_TURN = re.compile(r"^(D\d+:\d+|\d+) \| ([^:\n]+): (.*)$", re.M)
_SENT = re.compile(r"^(D\d+:\d+-\d+|\d+) \| (.*)$", re.M)
_FIRST_PERSON = {"I'm": "{s} is", "I've": "{s} has", "I'll": "{s} will", "I'd": "{s} would", "I": "{s}", "me": "{s}",
                 "my": "{s}'s", "mine": "{s}'s", "myself": "{s}"}
_FIRST_PERSON_WORD = re.compile(r"\b(" + "|".join(_FIRST_PERSON) + r")(?![\w'])")
_STOP = {"that", "this", "with", "have", "what", "about", "from", "your", "just", "really", "been", "were", "they",
         "there", "when", "would", "will", "them", "then", "into", "some", "much", "very", "also", "shared", "image"}


def tokens(chars: int) -> int:
    """The token proxy: characters / 4, rounded up."""
    return math.ceil(chars / 4)


# ------------------------------------------------------------------------------------- plausible replies

def _sentence(speaker: str, text: str) -> str:
    """A rewrite as a model writes it: the turn's words with the speaker's name for the first person."""
    out = _FIRST_PERSON_WORD.sub(lambda m: _FIRST_PERSON[m[1]].format(s=speaker), text)
    return out if speaker in out else f"{speaker}: {out}"


def _tag(text: str) -> str:
    content = [w.lower() for w in re.findall(r"[A-Za-z]{4,}", text) if w.lower() not in _STOP]
    return " ".join(content[:2]) or "chat"


def _cues(sentence: str) -> list[str]:
    return [w for w in re.findall(r"[A-Za-z]{4,}", sentence) if w.lower() not in _STOP][:8]


def _turns(prompt: str) -> list[tuple[str, str, str]]:
    return [(ref, spk, text) for ref, spk, text in _TURN.findall(prompt)]


def _facts(turns: list[tuple[str, str, str]]) -> list[tuple[Any, str, str, str]]:
    return [(ref, spk, _tag(text).split()[0], " ".join(_sentence(spk, text).split()[:8]))
            for i, (ref, spk, text) in enumerate(turns) if i % 3 == 0]


TOPICS = ["daily life and plans", "pets and hobbies", "work and family"]


def _number(ref: str) -> Any:
    return int(ref) if ref.isdigit() else ref


def plausible_reply(messages: list[Any], kwargs: dict[str, Any]) -> Any:
    """A reply in the shape the request asks for (the compact schemas are titled; json goes by its prompt)."""
    text = "\n".join(str(m.content) for m in messages)
    title = ((kwargs.get("response_format") or {}).get("schema") or {}).get("title")
    turns = _turns(text)
    facts = [[_number(ref), spk, aspect, fact] for ref, spk, aspect, fact in _facts(turns)]
    if title == "RewriteTurns":  # a row per turn in order, [tag, [topic numbers]]; no turn is dated here
        return {"topics": TOPICS, "turns": [[_tag(t), [1]] for _, _, t in turns], "times": [], "facts": facts}
    if title == "RewriteTopics":  # mra_turn_labels="derived": a row per turn in order, [topic numbers]
        return {"topics": TOPICS, "turns": [[1] for _ in turns], "facts": facts}
    if title in ("RewriteCompact", "RewriteMerged"):  # [turn number, sentence, tag, [topic numbers], date(, cues)]
        merged = title == "RewriteMerged"
        rows = []
        for ref, spk, t in turns:
            sentence = _sentence(spk, t)
            rows.append([_number(ref), sentence, _tag(t), [1], "", *([_cues(sentence)] if merged else [])])
        return {"topics": TOPICS, "sentences": rows, "facts": facts}
    if title == "CuesCompact":
        return {"cues": [[n, *_cues(s)] for n, s in _SENT.findall(text)]}
    if text.startswith("Rewrite this conversation"):  # the spec's keyed reply (json)
        return {"conversation_time": "", "topics": {f"t{i}": t for i, t in enumerate(TOPICS, start=1)},
                "sentences": [{"origin": ref, "text": _sentence(spk, t), "tag": _tag(t), "topics": ["t1"], "time": ""}
                              for ref, spk, t in turns],
                "personal_facts": [{"person": p, "aspect": a, "text": f, "origin": ref} for ref, p, a, f in facts]}
    if text.startswith("For each sentence"):
        return {"sentences": [{"id": i, "cues": _cues(s)} for i, s in _SENT.findall(text)]}
    raise AssertionError("unexpected ingestion request: " + text[:80])


# ----------------------------------------------------------------------------------------------- runs

def record(settings: dict[str, Any], data_dir: str | None = None, conversation: Any = None) -> list[dict[str, Any]]:
    """The sample dialogue (or `conversation`) ingested by MRAgent under `settings` (a setting this code lacks
    is left out): every request (`request_record`) with the reply it got, in order."""
    own = data_dir is None
    data_dir = data_dir or tempfile.mkdtemp(prefix="mra-ingest-")
    try:
        model = ScriptedChatModel(default=plausible_reply, with_usage=False)
        known = {f.name for f in fields(AllMethodsContext)}
        ctx = AllMethodsContext(data_dir=data_dir, chat_model=model,
                                **{k: v for k, v in settings.items() if k in known})
        ingest_conversation(conversation or load_conversation(SAMPLE), "sample", ctx, methods=["mragent"])
        out = []
        for call in model.calls:
            reply = plausible_reply(call["messages"], call["kwargs"])
            out.append({"request": request_record(call["messages"], call["kwargs"]), "reply": json.dumps(reply)})
        return out
    finally:
        if own:
            shutil.rmtree(data_dir, ignore_errors=True)


def digests(calls: list[dict[str, Any]]) -> list[str]:
    return [request_digest(c["request"]) for c in calls]


def measure(runs: dict[str, dict[str, Any]] | None = None, conversation: Any = None) -> dict[str, Any]:
    """Per run: calls, and per session the completion caps and estimated completion tokens of its calls."""
    out: dict[str, Any] = {}
    for label, settings in (runs or {"default (turn sentences, derived tags and dates)": {}, **RUNS}).items():
        calls = record(settings, conversation=conversation)
        sessions: list[dict[str, Any]] = []
        last_date = None
        for call in calls:
            prompt = call["request"]["messages"][0]["content"]
            dated = re.search(r"^Session date: (.*)$", prompt, re.M)
            if dated and dated[1] != last_date:  # the first call A of a session (its windows share the date)
                last_date = dated[1]
                sessions.append({"turns": 0, "calls": 0, "completion_cap": 0, "estimated_completion_tokens": 0})
            if dated:
                sessions[-1]["turns"] += len(_TURN.findall(prompt))
            sessions[-1]["calls"] += 1
            sessions[-1]["completion_cap"] += int(call["request"]["kwargs"].get("max_tokens") or 0)
            sessions[-1]["estimated_completion_tokens"] += tokens(len(call["reply"]))
        n = len(sessions)
        out[label] = {"settings": settings, "sessions": n,
                      "per_session": sessions,
                      "mean_completion_cap": round(sum(s["completion_cap"] for s in sessions) / n, 1),
                      "mean_estimated_completion_tokens":
                          round(sum(s["estimated_completion_tokens"] for s in sessions) / n, 1)}
    return out


def markdown(result: dict[str, Any], command: str) -> str:
    turns = [s["turns"] for s in next(iter(result.values()))["per_session"]]
    lines = ["# MRAgent ingestion: completion caps and estimated generated tokens per session", "",
             f"Command: `{command}`", "",
             f"No model. {len(turns)} sessions ({', '.join(map(str, turns))} turns) ingested with a scripted model whose replies",
             "are plausible ones in the shape each request asks for (same tags, topics and facts in every run).",
             "Estimated tokens = the reply's characters / 4: an estimate of what a model writes, not a measurement.",
             "", "| run | calls per session | completion cap per session | estimated completion tokens per session |",
             "|---|---|---|---|"]
    for label, r in result.items():
        calls = sum(s["calls"] for s in r["per_session"]) / r["sessions"]
        lines.append(f"| {label} | {calls:g} | {r['mean_completion_cap']} | {r['mean_estimated_completion_tokens']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "reports" / "speed"))
    ap.add_argument("--data", help="a dialogue file read at run time instead of the sample")
    ap.add_argument("--conv", help="the conversation id in --data")
    ap.add_argument("--sessions", type=int, default=3, help="its first sessions (with --data)")
    args = ap.parse_args(argv)
    command = "python benchmarks/mragent_ingest_tokens.py"
    if args.data:
        from dataclasses import replace

        conv = load_conversation(args.data, args.conv)
        conv = replace(conv, sessions=conv.sessions[: args.sessions])
        result = measure({"default (turn sentences, derived tags and dates)": {}, **{k: RUNS[k] for k in list(RUNS)[:3]}},
                         conv)
        command += f" --data {Path(args.data).name} --conv {args.conv} --sessions {args.sessions}"
    else:
        result = measure()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "mragent_ingest_tokens.json").write_text(
        json.dumps({"command": command, "token_proxy": "characters / 4 of a plausible reply (an estimate)",
                    "runs": result}, indent=1) + "\n")
    (out / "mragent_ingest_tokens.md").write_text(markdown(result, command))
    print(markdown(result, command))


if __name__ == "__main__":
    main()
