"""The structured-output helper: method per endpoint, lenient JSON, one retry, fallback, usage."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import BaseModel

from recollect.llm.scripted import scripted
from recollect.llm.structured import call_structured, extract_json, resolve_method
from recollect.llm.usage import merge_usage, token_source


class Pick(BaseModel):
    choice: int
    note: str = ""


MSGS = [HumanMessage(content="pick a number")]


def test_extracts_json_from_fences_prose_and_small_slips() -> None:
    assert extract_json('```json\n{"choice": 1}\n```') == {"choice": 1}
    assert extract_json('Sure! Here it is: {"choice": 2} hope that helps') == {"choice": 2}
    assert extract_json("{'choice': 3,}") == {"choice": 3}


def test_valid_reply_needs_one_call_and_counts_usage() -> None:
    model = scripted(['{"choice": 4}'])
    res = call_structured(model, MSGS, Pick, node="n")
    assert res.ok and res.value.choice == 4 and res.attempts == 1
    assert res.usage["calls"] == 1 and res.usage["by_node"]["n"]["calls"] == 1


def test_one_retry_shows_the_validation_error() -> None:
    model = scripted(['{"choice": "many"}', '{"choice": 5}'])
    res = call_structured(model, MSGS, Pick, node="n")
    assert res.ok and res.value.choice == 5 and res.attempts == 2
    retry_prompt = model.calls[1]["messages"][-1].content
    assert "choice" in retry_prompt and "could not be used" in retry_prompt
    assert res.usage["calls"] == 2


def test_two_failures_report_a_fallback_note() -> None:
    model = scripted(["nope", "still nope"])
    res = call_structured(model, MSGS, Pick, node="n")
    assert not res.ok and res.attempts == 2
    note = res.failure_note()
    assert note["fallback"] is True and note["error"] and note["raw"] == "still nope"


def test_method_binding_per_endpoint() -> None:
    model = scripted(['{"choice": 1}'])
    call_structured(model, MSGS, Pick, node="n", method="json_object_schema")
    rf = model.calls[0]["kwargs"]["response_format"]
    assert rf["type"] == "json_object" and rf["schema"]["properties"]["choice"]["type"] == "integer"
    model = scripted(['{"choice": 1}'])
    call_structured(model, MSGS, Pick, node="n", method="json_schema")
    assert model.calls[0]["kwargs"]["response_format"]["type"] == "json_schema"
    model = scripted([AIMessage(content="", tool_calls=[{"name": "Pick", "args": {"choice": 9}, "id": "1"}])])
    res = call_structured(model, MSGS, Pick, node="n", method="function_calling")
    assert res.value.choice == 9 and model.calls[0]["kwargs"]["tool_choice"] == "Pick"


def test_auto_method_detection() -> None:
    from langchain_openai import ChatOpenAI

    local = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", model="m")
    remote = ChatOpenAI(api_key="x", model="gpt-4o-mini")
    vllm = ChatOpenAI(base_url="http://gpu-box:8000/v1", api_key="x", model="m")
    assert resolve_method(local, "auto") == "json_object_schema"
    assert resolve_method(remote, "auto") == "json_schema"
    assert resolve_method(vllm, "auto") == "json_mode"
    assert resolve_method(vllm, "function_calling") == "function_calling"


def test_usage_estimates_when_the_endpoint_reports_none() -> None:
    model = scripted(['{"choice": 1}'], with_usage=False)
    res = call_structured(model, MSGS, Pick, node="n")
    assert res.usage["estimated_calls"] == 1 and res.usage["prompt_tokens"] > 0
    assert token_source(res.usage) == "estimate"
    both = merge_usage(res.usage, call_structured(scripted(['{"choice": 1}']), MSGS, Pick, node="m").usage)
    assert both["calls"] == 2 and set(both["by_node"]) == {"n", "m"} and token_source(both) == "mixed"


def test_unreachable_endpoint_raises_endpoint_error() -> None:
    import pytest
    from langchain_openai import ChatOpenAI

    from recollect.llm.structured import EndpointError

    dead = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", model="m", max_retries=0, timeout=2)
    with pytest.raises(EndpointError, match="node 'n'"):
        call_structured(dead, MSGS, Pick, node="n")


def test_local_servers_get_the_legacy_max_tokens_field() -> None:
    from langchain_core.messages import HumanMessage as H

    from recollect.llm.models import _openai

    local = _openai("http://127.0.0.1:9/v1", "x", "m")
    payload = local._get_request_payload([H(content="hi")], max_tokens=7)
    assert payload["max_tokens"] == 7 and payload["max_completion_tokens"] == 7
    assert resolve_method(local, "auto") == "json_object_schema"
    remote = _openai("https://api.openai.com/v1", "x", "gpt-4o-mini")
    assert "max_tokens" not in remote._get_request_payload([H(content="hi")], max_tokens=7)


def test_a_reply_cut_at_the_length_limit_is_salvaged() -> None:
    from openai import LengthFinishReasonError
    from openai.types.chat import ChatCompletion

    completion = ChatCompletion.model_validate({
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "length",
                     "message": {"role": "assistant", "content": '{"choice": 3, "note": "a long no'}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 400, "total_tokens": 410},
    })

    def cut(msgs, kw):  # noqa: ANN001, ANN202
        raise LengthFinishReasonError(completion=completion)

    res = call_structured(scripted([cut]), MSGS, Pick, node="n")
    assert res.ok and res.value.choice == 3 and res.usage["completion_tokens"] == 400


def test_embedded_server_gets_the_schema_as_a_compact_llguidance_grammar() -> None:
    import json

    from langchain_core.messages import HumanMessage as H

    from recollect.llm.models import JSON_WHITESPACE, _openai
    from recollect.llm.structured import json_format_kwargs

    fmt = json_format_kwargs(Pick, "json_object_schema")
    compact = _openai("http://127.0.0.1:9/v1", "x", "m", json_whitespace="compact")
    payload = compact._get_request_payload([H(content="hi")], **fmt)
    assert "response_format" not in payload
    head, _, schema = payload["extra_body"]["grammar"].partition("\nstart: %json ")
    assert head == "%llguidance {}"
    assert json.loads(schema) == {**Pick.model_json_schema(), "x-guidance": JSON_WHITESPACE["compact"]}
    # Plain JSON mode has no schema to compile: left as it is; other endpoints never get a grammar.
    mode = compact._get_request_payload([H(content="hi")], **json_format_kwargs(Pick, "json_mode"))
    assert mode["response_format"] == {"type": "json_object"} and "extra_body" not in mode
    flexible = _openai("http://127.0.0.1:9/v1", "x", "m")._get_request_payload([H(content="hi")], **fmt)
    assert flexible["response_format"]["schema"] == Pick.model_json_schema() and "extra_body" not in flexible


@pytest.mark.parametrize("reply", ["[" * 3000 + "]" * 3000, '{"a": ' * 2500 + "1" + "}" * 2500, "[" * 5000])
def test_a_reply_nested_too_deep_falls_back_instead_of_raising(reply: str) -> None:
    from pydantic import BaseModel

    from recollect.llm.scripted import scripted
    from recollect.llm.structured import call_structured

    class Answer(BaseModel):
        answer: str

    res = call_structured(scripted([reply, reply]), [HumanMessage(content="q")], Answer, node="t", method="json_mode")
    assert res.value is None and res.error and res.attempts == 2
