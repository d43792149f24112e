"""Judge tests with a fake chat model: prompt assembly, parsing, retries, scoring rule and the cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from recollect.eval.judge import (
    JUDGE_PROMPT_PATH,
    JUDGE_PROMPT_VERSION,
    MAX_ATTEMPTS,
    LLMJudge,
    build_judge_messages,
    cache_key,
    parse_judge_reply,
)
from recollect.eval.metrics import normalize_answer


class FakeJudgeModel(BaseChatModel):
    """Replies from a script (strings, or exceptions to raise); when it runs out, a rule decides."""

    script: list[Any] = []
    _calls: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "fake-judge"

    @property
    def calls(self) -> list[dict[str, Any]]:
        return self._calls

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self._calls.append({"messages": messages, "kwargs": kwargs})
        reply = self.script.pop(0) if self.script else _containment_rule(str(messages[-1].content))
        if isinstance(reply, Exception):
            raise reply
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])


def _containment_rule(prompt: str) -> str:
    """CORRECT when the gold's normalised tokens all occur in the generated answer."""
    gold = prompt.split("Gold answer: ", 1)[1].split("\n", 1)[0]
    pred = prompt.split("Generated answer: ", 1)[1].split("\n", 1)[0]
    ok = set(normalize_answer(gold).split()) <= set(normalize_answer(pred).split())
    return '{"reason": "compared", "label": "%s"}' % ("CORRECT" if ok else "WRONG")


def make(*script: Any, cache: Path | None = None) -> tuple[LLMJudge, FakeJudgeModel]:
    model = FakeJudgeModel(script=list(script))
    return LLMJudge(model, "fake-judge-1", cache_path=cache), model


def test_prompt_file_carries_every_element() -> None:
    text = JUDGE_PROMPT_PATH.read_text()
    assert JUDGE_PROMPT_PATH.name == f"{JUDGE_PROMPT_VERSION}.md"
    for needle in (
        "CORRECT",
        "WRONG",
        "generous",
        "same topic",
        "date",
        '"label"',
        "one sentence",
        "{question}",
        "{gold}",
        "{prediction}",
    ):
        assert needle in text


def test_prompt_assembly_has_only_question_gold_answer() -> None:
    judge, model = make('{"label": "CORRECT"}')
    judge.judge("When did Ann adopt a cat?", 2022, "In 2022 {maybe}")
    sent = model.calls[0]["messages"]
    assert len(sent) == 1
    expected = JUDGE_PROMPT_PATH.read_text().format(
        question="When did Ann adopt a cat?", gold="2022", prediction="In 2022 {maybe}"
    )
    assert sent[0].content == expected
    assert sent == build_judge_messages("When did Ann adopt a cat?", 2022, "In 2022 {maybe}")
    assert (
        "Question: When did Ann adopt a cat?\nGold answer: 2022\nGenerated answer: In 2022 {maybe}"
        in expected
    )
    # JSON mode and temperature 0 are requested from the backend.
    assert model.calls[0]["kwargs"]["response_format"] == {"type": "json_object"}
    assert model.calls[0]["kwargs"]["temperature"] == 0.0


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ('{"reason": "same date", "label": "CORRECT"}', "CORRECT"),
        ('```json\n{"reason": "different", "label": "WRONG"}\n```', "WRONG"),
        ('Sure! Here it is: {"reason": "ok", "label": "CORRECT"} Hope that helps.', "CORRECT"),
        ("{'reason': 'slightly broken', 'label': 'WRONG',}", "WRONG"),
        ('{"label": " correct "}', "CORRECT"),
        ("The answer matches the gold in topic. CORRECT", "CORRECT"),
        ("Reason: it names another city.\nLabel: WRONG", "WRONG"),
        ("It is correct, I think.", None),  # lower-case prose is not a label
        ("CORRECT or WRONG? Hard to say.", None),  # both labels: unreadable
        ("", None),
    ],
)
def test_parse_judge_reply(reply: str, label: str | None) -> None:
    assert parse_judge_reply(reply)[0] == label


def test_correct_only_scores_one() -> None:
    judge, _ = make('{"label": "CORRECT"}', '{"label": "WRONG"}')
    right = judge.judge("q", "a", "a")
    wrong = judge.judge("q", "a", "b")
    assert (right.label, right.score, right.error, right.calls) == ("CORRECT", 1, None, 1)
    assert (wrong.label, wrong.score, wrong.error) == ("WRONG", 0, None)


def test_retries_then_judge_error() -> None:
    judge, model = make("no idea", "still no idea", "maybe?")
    result = judge.judge("q", "gold", "pred")
    assert result.label is None and result.score == 0 and result.calls == MAX_ATTEMPTS == 3
    assert result.error and "3 attempts" in result.error and "maybe?" in result.error
    assert len(model.calls) == 3


def test_retry_recovers_on_later_attempt() -> None:
    judge, model = make("hmm", '{"label": "CORRECT"}')
    result = judge.judge("q", "gold", "pred")
    assert (result.label, result.score, result.calls) == ("CORRECT", 1, 2)


def test_failed_calls_count_as_attempts() -> None:
    judge, _ = make(RuntimeError("down"), RuntimeError("down"), RuntimeError("down"))
    result = judge.judge("q", "gold", "pred")
    assert result.score == 0 and result.calls == 3 and "RuntimeError: down" in (result.error or "")


def test_json_mode_rejected_falls_back_to_plain() -> None:
    judge, model = make(TypeError("response_format not supported"), "WRONG")
    result = judge.judge("q", "gold", "pred")
    assert result.label == "WRONG" and result.calls == 2
    assert "response_format" in model.calls[0]["kwargs"]
    assert "response_format" not in model.calls[1]["kwargs"]


def test_containment_fake_judge() -> None:
    judge, _ = make()
    assert judge.judge("Where?", "the museum", "She went to the museum yesterday").score == 1
    assert judge.judge("Where?", "the museum", "She stayed home").score == 0


def test_cache_hit_makes_no_call(tmp_path: Path) -> None:
    db = tmp_path / "cache" / "judge.sqlite"
    judge, model = make('{"reason": "r", "label": "CORRECT"}', cache=db)
    first = judge.judge("q", 3, "3 kids")
    assert first.calls == 1 and not first.cached
    again, model2 = make(cache=db)  # a fresh judge over the same cache file
    hit = again.judge("q", "3", "3 kids")  # the gold is hashed as a string: 3 and "3" share an entry
    assert hit.cached and hit.calls == 0 and (hit.label, hit.score, hit.reason) == ("CORRECT", 1, "r")
    assert model2.calls == []
    other, model3 = make('{"label": "WRONG"}', cache=db)
    other.model_name = "another-judge"  # a different judge model never reads another's verdicts
    assert other.judge("q", 3, "3 kids").label == "WRONG" and len(model3.calls) == 1


def test_errors_are_not_cached(tmp_path: Path) -> None:
    db = tmp_path / "judge.sqlite"
    judge, _ = make("?", "?", "?", cache=db)
    assert judge.judge("q", "g", "p").error
    judge2, model2 = make('{"label": "CORRECT"}', cache=db)
    assert judge2.judge("q", "g", "p").score == 1 and len(model2.calls) == 1


def test_cache_key_covers_all_inputs() -> None:
    base = cache_key("m", "v1", "q", "g", "p")
    variants = [
        cache_key("m2", "v1", "q", "g", "p"),
        cache_key("m", "v2", "q", "g", "p"),
        cache_key("m", "v1", "q2", "g", "p"),
        cache_key("m", "v1", "q", "g2", "p"),
        cache_key("m", "v1", "q", "g", "p2"),
    ]
    assert len({base, *variants}) == 6 and len(base) == 64
