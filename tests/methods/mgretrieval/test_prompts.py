"""MGRetrieval's question-time prompt layout (prompts/mgretrieval/): instructions first, data last."""

from __future__ import annotations

import pytest

from recollect.prompts import render_prompt


@pytest.mark.parametrize(("name", "data_marker"), [("select_keywords", "Candidate keywords:"),
                                                    ("assess", "Key memories kept")])
def test_question_time_prompts_put_the_instructions_first(name: str, data_marker: str) -> None:
    """Static first, question last: two questions' calls of a kind share everything before the per-call
    data, so the server's prefix cache reuses the instructions from one call to the next."""
    def render(question: str, memory: str) -> str:
        return render_prompt("mgretrieval", name, question=question, candidates=f"1. {memory}", depth=3,
                             previous_answer="(none yet)", critical="(none)", new=f"[D1:1] {memory}", max_critical=5)

    a, b = render("Where did Ann find Pixel?", "shelter"), render("What does Bob carve?", "wooden birds")
    static = a[: a.index(data_marker)]
    assert b.startswith(static) and "Reply with one JSON object" in static
    assert "Where did Ann find Pixel?" not in static and a.rindex("Question:") > a.index(data_marker)
