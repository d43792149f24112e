"""The embedded server's structured replies: valid against the schema, and compact when the grammar asks."""

from __future__ import annotations

from langchain_core.messages import HumanMessage
from pydantic import BaseModel

from app.config import get_settings
from app.llm.structured import call_structured, json_format_kwargs


class Fact(BaseModel):
    person: str
    pet: str
    years: list[int]


def test_structured_reply_is_valid_and_compact_on_xllamacpp(chat_model) -> None:  # noqa: ANN001
    msgs = [HumanMessage(content="Ann has had a cat since 2019 and again since 2021. Reply with JSON: person, "
                                 "pet, years (the years named).")]
    res = call_structured(chat_model, msgs, Fact, node="t", method="json_object_schema", max_tokens=60)
    assert res.value is not None and res.value.person, res.error
    if get_settings().local_runtime == "xllamacpp" and get_settings().local_json_whitespace == "compact":
        assert getattr(chat_model, "recollect_compact_json", False)
        # Compact: fixed separators, no newlines or indentation between JSON tokens.
        raw = chat_model.bind(**json_format_kwargs(Fact, "json_object_schema"), max_tokens=60).invoke(msgs).content
        assert "\n" not in raw and raw.startswith('{"person": "'), raw
