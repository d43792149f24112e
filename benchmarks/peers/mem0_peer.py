"""mem0 (`mem0ai`) through its public `Memory` API, on the embedded model and our MiniLM embeddings, offline.

Configuration (`mem0_config`), all documented mem0 options:
- `llm`: provider `langchain` with the backbone's chat model (metered; JSON mode on every call, which is
  what mem0 asks for and its LangChain provider does not pass on);
- `embedder`: provider `langchain` with our embeddings (all-MiniLM-L6-v2, 384 dimensions);
- `vector_store`: `qdrant` in local mode, on disk under the peer's store folder (no server);
- `history_db_path` under the same folder; no graph store, no reranker, telemetry off; spaCy and fastembed
  are not installed, so mem0's optional lemmatisation, entity linking and BM25 stay off;
- its default prompts: mem0 1.x's fact-extraction and memory-update prompts fit the 8k context.

Ingestion is one `add(messages, user_id=namespace, metadata={...})` per session (infer on: mem0 extracts
facts and decides ADD / UPDATE / DELETE itself); a question is one `search(question, user_id=namespace)`
with the top k. mem0 ≥ 2.0 takes `filters={"user_id": ...}` and `top_k` instead; both forms are handled.
"""

from __future__ import annotations

import inspect
import logging
import os
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from benchmarks.peers.base import Found, Stored, session_messages
from recollect.dialogue.models import Session
from recollect.llm.structured import _is_endpoint_failure

EVENTS = ("ADD", "UPDATE", "DELETE")


# mem0 reads these when it is first imported: no telemetry (it would try the network), and its home
# folder (a config file, migrations) inside our store rather than ~/.mem0.
os.environ["MEM0_TELEMETRY"] = "False"


def _import_memory(home: Path) -> type:
    home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MEM0_DIR", str(home))
    from mem0 import Memory
    from mem0.memory import telemetry

    if telemetry.MEM0_TELEMETRY:  # mem0 was imported before this module set the switch
        raise RuntimeError("mem0 telemetry is on: set MEM0_TELEMETRY=False before mem0 is first imported")
    return Memory


def mem0_config(store_dir: Path, chat_model: BaseChatModel, embeddings: Embeddings, dims: int) -> dict[str, Any]:
    """The whole mem0 configuration; nothing else is changed from mem0's defaults."""
    return {
        "llm": {"provider": "langchain", "config": {"model": chat_model}},
        "embedder": {"provider": "langchain", "config": {"model": embeddings}},
        "vector_store": {"provider": "qdrant", "config": {
            "collection_name": "mem0", "path": str(store_dir / "qdrant"), "embedding_model_dims": dims,
            "on_disk": True}},
        "history_db_path": str(store_dir / "history.db"),
    }


def describe_config(dims: int) -> dict[str, Any]:
    """The configuration as it goes into the run's records (the objects by name)."""
    return {"llm": "langchain: the backbone chat model, JSON mode", "embedder": f"langchain: our embeddings ({dims} d)",
            "vector_store": "qdrant local, on disk", "graph_store": None, "reranker": None,
            "prompts": "mem0 defaults", "add": "one call per session, user_id=namespace, infer=True",
            "search": "user_id=namespace, top k"}


class _ErrorLog(logging.Handler):
    """mem0 logs (rather than raises) a reply it cannot parse; those lines are the session's errors."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage()[:500])


class Mem0Peer:
    name = "mem0"

    def __init__(self, store_dir: Path, chat_model: BaseChatModel, embeddings: Embeddings, dims: int) -> None:
        store_dir.mkdir(parents=True, exist_ok=True)
        Memory = _import_memory(store_dir / "home")
        self.memory = Memory.from_config(mem0_config(store_dir, chat_model, embeddings, dims))
        search = inspect.signature(self.memory.search).parameters
        self._scoped = "user_id" in search  # mem0 1.x: user_id=..., limit=; 2.x: filters={...}, top_k=

    def _scope(self, namespace: str) -> dict[str, Any]:
        return {"user_id": namespace} if self._scoped else {"filters": {"user_id": namespace}}

    def ingest_session(self, namespace: str, session: Session) -> Stored:
        handler = _ErrorLog()
        logger = logging.getLogger("mem0")
        logger.addHandler(handler)
        errors: list[str] = []
        try:
            out = self.memory.add(session_messages(session), user_id=namespace,
                                  metadata={"session": session.index, "date_time": session.date_time})
        except Exception as exc:  # mem0 1.x lets a failed extraction call raise: the session stores nothing
            if _is_endpoint_failure(exc):  # the backbone is down: stop the run, not the session
                raise
            out, errors = {}, [f"{type(exc).__name__}: {exc}"[:500]]
        finally:
            logger.removeHandler(handler)
        results = out.get("results", []) if isinstance(out, dict) else list(out or [])
        events = [(str(r["id"]), str(r.get("event"))) for r in results if r.get("event") in EVENTS]
        return Stored(events=events, errors=handler.lines + errors)

    def search(self, namespace: str, query: str, k: int) -> list[Found]:
        size = {"limit": k} if self._scoped else {"top_k": k}
        out = self.memory.search(query, **self._scope(namespace), **size)
        results = out.get("results", []) if isinstance(out, dict) else list(out or [])
        return [Found(str(r["id"]), str(r.get("memory", "")), r.get("score")) for r in results[:k]]

    def count(self, namespace: str) -> int:
        size = {"limit": 100_000} if self._scoped else {"top_k": 100_000}
        out = self.memory.get_all(**self._scope(namespace), **size)
        return len(out.get("results", []) if isinstance(out, dict) else list(out or []))

    def close(self) -> None:
        # Releases the on-disk qdrant lock so a later run (or test) can open the same folder.
        client = getattr(getattr(self.memory, "vector_store", None), "client", None)
        if client is not None and hasattr(client, "close"):
            client.close()
