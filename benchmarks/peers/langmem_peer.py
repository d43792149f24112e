"""LangMem (`langmem`) through its public API: a memory store manager writing into a LangGraph store.

Configuration (`describe_config`), LangMem's defaults except where named:
- `create_memory_store_manager(chat_model, namespace=("memories", "{langgraph_user_id}"), store=store)`:
  default schema (free-text `Memory`), default instructions, inserts on, deletes off, no query model
  (existing memories are found by embedding search over the conversation), `query_limit` 5;
- the store is LangGraph's `InMemoryStore` with our embeddings as its index (`{"dims": 384, "embed":
  embeddings}`), the store LangMem's documentation uses. Its items are written to `items.json` after every
  session and put back on start, so an interrupted run resumes. (LangGraph's `SqliteStore` would persist by
  itself, but its vector index loads the sqlite-vec extension, which this Python's sqlite3 cannot load.)

Ingestion is one `manager.invoke({"messages": session}, config)` per session with
`langgraph_user_id = namespace`; a question is one `manager.search(query=question, limit=k)`.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from benchmarks.peers.base import Found, Stored, session_messages
from recollect.dialogue.models import Session
from recollect.llm.structured import _is_endpoint_failure

NAMESPACE = ("memories", "{langgraph_user_id}")


def describe_config(dims: int) -> dict[str, Any]:
    return {"manager": "create_memory_store_manager (default schema, instructions, query_limit 5, "
                       "inserts on, deletes off, no query model)",
            "namespace": list(NAMESPACE), "store": f"langgraph InMemoryStore, index dims={dims}, embed=our embeddings",
            "ingest": "manager.invoke per session, langgraph_user_id=namespace", "search": "manager.search, top k"}


def memory_text(value: Any) -> str:
    """The text of a stored LangMem item: `{"kind": "Memory", "content": {"content": "..."}}`."""
    content = value.get("content") if isinstance(value, dict) else value
    if isinstance(content, dict):
        inner = content.get("content")
        return inner if isinstance(inner, str) else json.dumps(content, ensure_ascii=False)
    return str(content)


class _ErrorLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage()[:500])


class LangMemPeer:
    name = "langmem"

    def __init__(self, store_dir: Path, chat_model: BaseChatModel, embeddings: Embeddings, dims: int) -> None:
        from langgraph.store.memory import InMemoryStore
        from langmem import create_memory_store_manager

        store_dir.mkdir(parents=True, exist_ok=True)
        self.path = store_dir / "items.json"
        self.store = InMemoryStore(index={"dims": dims, "embed": embeddings})
        saved = json.loads(self.path.read_text(encoding="utf-8")) if self.path.is_file() else []
        for item in saved:  # re-embedded on the way in, as when LangMem wrote them
            self.store.put(tuple(item["namespace"]), item["key"], item["value"])
        self.manager = create_memory_store_manager(chat_model, namespace=NAMESPACE, store=self.store)

    @staticmethod
    def _config(namespace: str) -> dict[str, Any]:
        return {"configurable": {"langgraph_user_id": namespace}}

    def ingest_session(self, namespace: str, session: Session) -> Stored:
        before = {it.key for it in self.store.search(("memories", namespace), limit=100_000)}
        handler = _ErrorLog()
        for name in ("langmem", "trustcall"):
            logging.getLogger(name).addHandler(handler)
        errors: list[str] = []
        try:
            puts = self.manager.invoke({"messages": session_messages(session)}, config=self._config(namespace))
        except Exception as exc:  # the manager raises when the model's tool calls never validate
            if _is_endpoint_failure(exc):  # the backbone is down: stop the run, not the session
                raise
            puts, errors = [], [f"{type(exc).__name__}: {exc}"[:500]]
        finally:
            for name in ("langmem", "trustcall"):
                logging.getLogger(name).removeHandler(handler)
        events = [(str(p["key"]), "UPDATE" if p["key"] in before else "ADD") for p in puts or []]
        self._save()
        return Stored(events=events, errors=handler.lines + errors)

    def search(self, namespace: str, query: str, k: int) -> list[Found]:
        items = self.manager.search(query=query, limit=k, config=self._config(namespace))
        return [Found(str(it.key), memory_text(it.value), it.score) for it in items[:k]]

    def count(self, namespace: str) -> int:
        return len(self.store.search(("memories", namespace), limit=100_000))

    def _save(self) -> None:
        items = self.store.search(("memories",), limit=1_000_000)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps([{"namespace": list(it.namespace), "key": it.key, "value": it.value}
                                   for it in items], ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    def close(self) -> None:
        self._save()
