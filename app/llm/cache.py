"""Content-hash cache for ingestion-time LLM calls, and the one cached structured call.

The key covers everything that can change the reply: namespace (so no cache crosses a namespace
wall), method, call name, prompt-template hash, model, temperature and the canonical input.
Re-ingesting the same content therefore makes no LLM call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from recollect.llm.structured import StructuredResult, call_structured
from recollect.memory.docstore import DocStore
from recollect.memory.store_docs import StoreDocs
from recollect.prompts import prompt_hash

T = TypeVar("T", bound=BaseModel)


def cache_key(namespace: str, method: str, call: str, model: str, temperature: float, payload: Any) -> str:
    """`<namespace>:<content hash>`: the readable prefix lets `recollect forget` delete a namespace's entries."""
    canon = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    parts = [namespace, method, call, prompt_hash(method, call), model, f"{temperature:g}", canon]
    return f"{namespace}:" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


class LLMCache:
    def __init__(self, docs: DocStore | StoreDocs) -> None:
        self.docs = docs
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Any:
        value = self.docs.cache_get(key)
        if value is None and ":" in key:
            # Entries written before keys had a namespace prefix: reuse them under the new key, so an
            # upgrade re-runs no ingestion call.
            value = self.docs.cache_get(key.split(":", 1)[1])
            if value is not None:
                self.docs.cache_put(key, value)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, key: str, value: Any) -> None:
        self.docs.cache_put(key, value)


@dataclass
class CachedCall(Generic[T]):
    """A structured ingestion call, answered from the cache or the model."""

    value: T | None
    cached: bool
    result: StructuredResult[T] | None = None  # the model's result when it was called (raw reply, usage)

    @property
    def error(self) -> str | None:
        return None if self.value is not None else (self.result.error if self.result else "invalid reply")


def cached_structured_call(
    cache: LLMCache,
    key: str,
    model: Any,
    messages: list,
    schema: type[T],
    *,
    node: str,
    method: str,
    max_tokens: int | None,
    report: Any,
    legacy: Callable[[dict[str, Any]], Any] | None = None,
    check: Callable[[T], str | None] | None = None,
) -> CachedCall[T]:
    """The project's one cached structured call, used by every memory builder.

    A hit makes no call and counts in `report.cached_calls`; a miss calls the model
    (`call_structured`: one retry with the validation error) and counts its usage. Only a valid reply
    is cached: a reply that failed (a weak model, a flaky endpoint) is asked again on the next ingest,
    so a fallback memory never outlives a working model. `legacy` turns a cache entry written in a
    method's older format into a reply dict (or None). `check` (see `call_structured`) says what a reply
    that fits the schema still lacks, e.g. that it names nothing: such a reply is failed, never cached, and
    an entry cached before the check existed is asked again.
    """
    hit = cache.get(key)
    if hit is not None:
        value: Any = None
        if hit.get("ok", True) and hit.get("value") is not None:
            value = hit["value"]
        elif legacy is not None:
            value = legacy(hit)
        try:
            reply = schema.model_validate(value) if value is not None else None
        except ValueError:  # an entry this schema no longer accepts is a miss, like one never written
            reply = None
        if reply is not None and (check is None or not check(reply)):
            report.cached_calls += 1
            return CachedCall(reply, cached=True)
    res = call_structured(model, messages, schema, node=node, method=method, max_tokens=max_tokens, check=check)
    report.add_usage(res.usage)
    if res.value is not None:
        cache.put(key, {"ok": True, "value": res.value.model_dump()})
    return CachedCall(res.value, cached=False, result=res)
