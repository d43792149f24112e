"""Usage accounting: LLM calls, prompt/completion tokens and latency, per node and per run.

A usage record is a plain dict so it can live in the checkpointed state:
`{"calls", "prompt_tokens", "completion_tokens", "cached_tokens", "latency_s", "estimated_calls", "mg_tokens",
"by_node": {node: {...same counters...}}}`. `cached_tokens` are prompt tokens the server reused from its
prompt cache instead of prefilling (OpenAI's and llama.cpp's `prompt_tokens_details.cached_tokens`).
`prefill_s` and `decode_s` are the seconds the server itself reported for computing the prompt and generating
the reply (llama.cpp's `timings`), summed over the `timed_calls` that had them; `latency_s` is the client's. Tokens come from the API's usage fields when the reply
has them, otherwise from the MGRetrieval estimator (`estimate_tokens`), and `estimated_calls`
counts the latter so reports can say whether figures are measured, estimated or mixed.
"""

from __future__ import annotations

import re
from typing import Any

COUNTERS = ("calls", "prompt_tokens", "completion_tokens", "cached_tokens", "latency_s", "estimated_calls", "mg_tokens",
            "prefill_s", "decode_s", "timed_calls")
SECONDS = ("latency_s", "prefill_s", "decode_s")
TOKEN_ESTIMATOR = "mg: 1.1*words + 0.35*symbols"

_WORD = re.compile(r"\w+")
_SYMBOL = re.compile(r"[^\w\s]")


def mg_token_estimate(text: str) -> float:
    """MGRetrieval's estimate (appendix A.2): 1.1·words + 0.35·symbols."""
    return 1.1 * len(_WORD.findall(text)) + 0.35 * len(_SYMBOL.findall(text))


def estimate_tokens(text: str) -> int:
    return int(round(mg_token_estimate(text)))


def call_record(
    node: str,
    *,
    prompt_tokens: int,
    completion_tokens: int,
    latency_s: float,
    estimated: bool,
    mg_tokens: float,
    cached_tokens: int = 0,
    server_timings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    counters = {
        "calls": 1,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cached_tokens": cached_tokens,
        "latency_s": round(latency_s, 4),
        "estimated_calls": 1 if estimated else 0,
        "mg_tokens": round(mg_tokens, 2),
        "prefill_s": 0.0,
        "decode_s": 0.0,
        "timed_calls": 0,
    }
    if server_timings and "prompt_ms" in server_timings and "predicted_ms" in server_timings:
        counters.update(prefill_s=round(float(server_timings["prompt_ms"]) / 1000, 4),
                        decode_s=round(float(server_timings["predicted_ms"]) / 1000, 4), timed_calls=1)
    return dict(counters, by_node={node: dict(counters)})


def _add_counters(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {k: a.get(k, 0) + b.get(k, 0) for k in COUNTERS}
    for k in SECONDS:
        out[k] = round(out[k], 4)
    out["mg_tokens"] = round(out["mg_tokens"], 2)
    return out


def merge_usage(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    if not left:
        return dict(right) if right else {}
    if not right:
        return dict(left)
    out = _add_counters(left, right)
    by_node = {k: dict(v) for k, v in (left.get("by_node") or {}).items()}
    for node, counters in (right.get("by_node") or {}).items():
        by_node[node] = _add_counters(by_node.get(node, {}), counters)
    out["by_node"] = by_node
    return out


def token_source(usage: dict[str, Any]) -> str:
    """`usage` when every call had API usage fields, `estimate` when none did, else `mixed`."""
    calls = usage.get("calls", 0)
    est = usage.get("estimated_calls", 0)
    if not calls or est == 0:
        return "usage"
    return "estimate" if est == calls else "mixed"


def cost_summary(usage: dict[str, Any]) -> dict[str, Any]:
    """What one question cost, as a run's output reports it: model calls, tokens, and seconds spent in them."""
    return {"calls": int(usage.get("calls", 0)), "prompt_tokens": int(usage.get("prompt_tokens", 0)),
            "completion_tokens": int(usage.get("completion_tokens", 0)),
            "model_seconds": round(float(usage.get("latency_s", 0.0)), 3)}
