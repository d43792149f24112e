"""`recollect demo` with a scripted reader model: it builds MemR3's and HyMem's memory of the sample
dialogue and asks every demo question with MemR3, HyMem and rag (no setup, no real model)."""

from __future__ import annotations

import re
from typing import Any

import pytest

import recollect.cli as cli
from recollect.graphs.registry import AllMethodsContext
from recollect.llm.scripted import ScriptedChatModel

LINE = re.compile(r"^\[(D\d+:\d+)\] ([^:\n]+): (.*)$", re.M)
FACTS = {"looked after": "Priya", "work now": "Oakwood Vet Clinic"}


def reader(messages: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Answers only from what the prompt shows: the demo fact for the question, if the prompt holds it."""
    title = kwargs["response_format"]["schema"]["title"]
    prompt = str(messages[-1].content)
    if title == "SummaryReply":
        return {"items": [{"text": f"{s}: {t}", "turn_ids": [i]} for i, s, t in LINE.findall(prompt)]}
    if title == "ReflectReply":
        return {"finished": 1}
    if title == "SelectReply":
        return {"selected": [0, 1, 2]}
    asked = re.search(r"^Question: (.*)$", prompt, re.M)  # wherever the layout puts it
    question = asked[1] if asked else ""
    fact = next((v for k, v in FACTS.items() if k in question), "")
    found = fact.split()[0] in prompt.replace(asked[0], "") if asked else False
    answer = fact if found else "No information available"
    if title.startswith("RouterDecision"):
        return {"evidence": [], "gaps": [], "decision": "answer", "detailed_answer": answer}
    if title in ("LightReply", "LightTurnsReply"):  # the light call reads summaries or turns
        return {"finished": 0 if found else 2, "answer": answer if found else "", "used": [0]}
    return {"answer": answer, "supports": []}


def test_demo_ingests_memr3_and_hymem_and_answers_with_both(monkeypatch: pytest.MonkeyPatch, data_dir: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    model = ScriptedChatModel(default=reader)
    monkeypatch.setenv("RECOLLECT_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # skips the local setup
    monkeypatch.setattr(cli, "_context", lambda args, methods=None: AllMethodsContext(data_dir=data_dir, chat_model=model))
    assert cli.main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "hymem: " in out and "sessions summarised" in out
    for question, _ in cli.DEMO_QUESTIONS:
        for method in ("memr3", "hymem", "rag"):
            assert f"== {method}: {question}" in out
    assert out.count("expected: ") == 6 and "WRONG" not in out
    assert "6 of 6 answers hold the expected text" in out
    summarise_calls = [c for c in model.calls if c["kwargs"]["response_format"]["schema"]["title"] == "SummaryReply"]
    assert len(summarise_calls) == 4  # one per sample session
