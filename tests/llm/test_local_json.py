"""The embedded server's structured replies: valid against the schema, and compact when the grammar asks."""

from __future__ import annotations

import os

import pytest
from langchain_core.messages import HumanMessage
from pydantic import BaseModel

from recollect.llm.structured import call_structured, json_format_kwargs
from recollect.settings import get_settings


class Fact(BaseModel):
    person: str
    pet: str
    years: list[int]


MSGS = [HumanMessage(content="Ann has had a cat since 2019 and again since 2021. Reply with JSON: person, pet, "
                             "years (the years named).")]


def test_structured_reply_is_valid(chat_model) -> None:  # noqa: ANN001
    res = call_structured(chat_model, MSGS, Fact, node="t", method="json_object_schema", max_tokens=60)
    assert res.value is not None and res.value.person, res.error


def test_compact_grammar_gives_one_line_json_on_xllamacpp(chat_model) -> None:  # noqa: ANN001
    if os.environ.get("RECOLLECT_LLM_BASE_URL") or get_settings().local_runtime != "xllamacpp":
        pytest.skip("the compact llguidance grammar is for the embedded xllamacpp server")
    from recollect.llm.models import _openai, local_server
    from recollect.llm.native_build import installed_from

    if installed_from() is not None:  # the wheel compiled by `recollect setup` is built without llguidance
        pytest.skip("this xllamacpp was compiled here without llguidance (local_json_whitespace=flexible only)")

    server = local_server()
    compact = _openai(server.base_url, "local", server.spec.alias, json_whitespace="compact")
    res = call_structured(compact, MSGS, Fact, node="t", method="json_object_schema", max_tokens=60)
    assert res.value is not None and res.value.person, res.error
    # Fixed separators, no newlines or indentation between JSON tokens (the server accepted the grammar).
    raw = compact.bind(**json_format_kwargs(Fact, "json_object_schema"), max_tokens=60).invoke(MSGS).content
    assert "\n" not in raw and raw.startswith('{"person": "'), raw
