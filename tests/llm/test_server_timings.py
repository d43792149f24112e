"""Where a call's seconds went: llama.cpp's per-request `timings` reach the usage record as prefill and decode."""

from __future__ import annotations

import json

import httpx
from langchain_core.messages import HumanMessage

from recollect.llm.models import _openai
from recollect.llm.structured import invoke_counted
from recollect.llm.usage import merge_usage


def _model_answering(body: dict) -> object:
    """The OpenAI-compatible chat model of recollect, its HTTP answered by `body` (no server)."""
    chat = _openai("http://127.0.0.1:9/v1", "local", "qwen")
    client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, json=body)))
    root = chat.root_client.copy(http_client=client)
    object.__setattr__(chat, "root_client", root)
    object.__setattr__(chat, "client", root.chat.completions)
    return chat


def _completion(**extra: object) -> dict:
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": "qwen",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Biscuit"}}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 3, "total_tokens": 123,
                      "prompt_tokens_details": {"cached_tokens": 100}}, **extra}


def test_llama_cpp_timings_become_prefill_and_decode_seconds() -> None:
    timings = {"prompt_n": 20, "prompt_ms": 250.0, "predicted_n": 3, "predicted_ms": 180.5, "cache_n": 100,
               "prompt_per_second": 80.0}
    msg, usage = invoke_counted(_model_answering(_completion(timings=timings)), [HumanMessage("dog?")], "answer")
    assert msg.content == "Biscuit"
    assert msg.response_metadata["timings"] == {k: timings[k] for k in ("prompt_n", "prompt_ms", "predicted_n",
                                                                        "predicted_ms", "cache_n")}
    assert (usage["prefill_s"], usage["decode_s"], usage["timed_calls"]) == (0.25, 0.1805, 1)
    assert usage["by_node"]["answer"]["prefill_s"] == 0.25
    assert usage["cached_tokens"] == 100 and usage["prompt_tokens"] == 120
    twice = merge_usage(usage, usage)
    assert (twice["prefill_s"], twice["decode_s"], twice["timed_calls"], twice["calls"]) == (0.5, 0.361, 2, 2)


def test_an_endpoint_without_timings_counts_the_call_untimed() -> None:
    msg, usage = invoke_counted(_model_answering(_completion()), [HumanMessage("dog?")], "answer")
    assert "timings" not in msg.response_metadata
    assert (usage["prefill_s"], usage["decode_s"], usage["timed_calls"], usage["calls"]) == (0.0, 0.0, 0, 1)
    assert usage["latency_s"] > 0


def test_malformed_timings_are_ignored() -> None:
    _, usage = invoke_counted(_model_answering(_completion(timings={"prompt_n": 3})), [HumanMessage("x")], "answer")
    assert usage["timed_calls"] == 0
    json.dumps(usage)  # stays plain data for the checkpointed state
