"""Content-hash cache for ingestion-time LLM calls.

The key covers everything that can change the reply: namespace (so no cache crosses a namespace
wall), method, call name, prompt-template hash, model, temperature and the canonical input.
Re-ingesting the same content therefore makes no LLM call.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from recollect.memory.docstore import DocStore
from recollect.prompts import prompt_hash


def cache_key(namespace: str, method: str, call: str, model: str, temperature: float, payload: Any) -> str:
    """`<namespace>:<content hash>`: the readable prefix lets `recollect forget` delete a namespace's entries."""
    canon = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    parts = [namespace, method, call, prompt_hash(method, call), model, f"{temperature:g}", canon]
    return f"{namespace}:" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


class LLMCache:
    def __init__(self, docs: DocStore) -> None:
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
