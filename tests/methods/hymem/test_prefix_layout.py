"""HyMem's prefix layout (hymem_prefix_layout): the same information in every call, the question and the
call's memory first, the step's task last, and the deep selection starting with the light call's prompt."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from recollect.graphs.registry import AllMethodsContext
from recollect.llm.scripted import ScriptedChatModel
from tests.methods.hymem.test_graph import (
    LIGHT_NO,
    NUMBERED,
    TOPICS,
    Q,
    build_store,
    calls_of,
    model,
    prompt,
    run,
)

TURN = re.compile(r"^\[(D\d+:\d+)\] ", re.M)
REWRITE = {"finished": 0, "new_question": "Where did Bob run a marathon?"}


@pytest.fixture
def ctx(data_dir: str) -> AllMethodsContext:
    return build_store(data_dir, TOPICS)


def deep_path(ctx: AllMethodsContext, layout: bool, light_k: int = 10, **replies: Any) -> ScriptedChatModel:
    m = model(LightReply=LIGHT_NO, **replies)
    run(ctx, m, hymem_prefix_layout=layout, hymem_light_k=light_k)
    return m


def pieces(call: dict[str, Any]) -> tuple[Any, ...]:
    """What a call shows, whatever the order: the question, numbered summaries, turns, pool and answer."""
    text = prompt(call)
    return (Q in text, sorted(NUMBERED.findall(text)), sorted(TURN.findall(text)),
            re.findall(r"^previous answer: .*$", text, re.M), re.findall(r"^Answer: .*$", text, re.M))


def test_each_call_shows_the_same_pieces_in_either_layout(ctx: AllMethodsContext) -> None:
    # Two rounds: light, selection, deep answer, reflect (rewrite), light with the pool, selection, deep answer.
    seen = {}
    for layout in (False, True):
        m = deep_path(ctx, layout, ReflectReply=REWRITE)
        seen[layout] = [(c["kwargs"]["response_format"]["schema"]["title"], pieces(c)) for c in m.calls]
    assert [k for k, _ in seen[True]] == ["LightReply", "SelectReply", "DeepReply", "ReflectReply",
                                          "LightReply", "SelectReply", "DeepReply"]
    assert seen[False] == seen[True]


def test_every_call_shares_the_frame_and_the_question_and_ends_with_its_task(ctx: AllMethodsContext) -> None:
    m = deep_path(ctx, True)
    frames = {c["messages"][0].content for c in m.calls}
    assert len(frames) == 1 and all(c["messages"][0].type == "system" for c in m.calls)
    for c in m.calls:
        user = c["messages"][-1].content
        assert user.startswith(f"Question: {Q}\n\n")
        task = user[user.index("\n\nTask: "):]
        assert not NUMBERED.search(task) and not TURN.search(task)  # the memory comes before the task
        assert task.rstrip().splitlines()[-1].startswith("Reply with one JSON object only")


def test_the_selection_starts_with_the_light_calls_question_and_summaries(ctx: AllMethodsContext) -> None:
    m = deep_path(ctx, True, light_k=3)
    light, select = calls_of(m, "LightReply")[0], calls_of(m, "SelectReply")[0]
    shared = prompt(light)[: len(os.path.commonprefix([prompt(light), prompt(select)]))]
    light_lines = NUMBERED.findall(prompt(light))
    assert len(light_lines) == 3 and NUMBERED.findall(shared + "\n") == light_lines
    assert NUMBERED.findall(prompt(select))[:3] == light_lines and len(NUMBERED.findall(prompt(select))) > 3


def test_the_off_layout_sends_the_papers_prompts(ctx: AllMethodsContext) -> None:
    m = deep_path(ctx, False)
    firsts = [c["messages"][0].content.split("\n", 1)[0] for c in m.calls]
    assert all(len(c["messages"]) == 1 for c in m.calls)
    assert firsts == ["You answer a question about a past conversation using memory summaries.",
                      "You are a retriever. Below are numbered memory summaries of a past conversation.",
                      "Answer a question about a past conversation using the raw conversation sessions below.",
                      "Check whether an answer meets a question about a past conversation."]


def test_the_paper_profile_turns_the_layout_off() -> None:
    assert AllMethodsContext(profile="paper").hymem_prefix_layout is False
    assert AllMethodsContext().hymem_prefix_layout is False  # off by default until measured on the model
    assert AllMethodsContext(profile="paper", hymem_prefix_layout=True).hymem_prefix_layout is True
