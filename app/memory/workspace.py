"""A data directory: the embedded database, the Chroma client and the embedder, opened once.

`open_workspace(data_dir)` is cached per process. Namespaces are validated here; every store
method takes the namespace and can only see that namespace's documents and collections.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from recollect.dialogue.models import Conversation, Session, Turn
from recollect.memory.docstore import DocStore
from recollect.memory.embeddings import embedder_name, get_embeddings
from recollect.memory.vectors import Unit, VectorIndex

_NS = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,60}[A-Za-z0-9])?$")


class NamespaceError(ValueError):
    """A namespace name is invalid, or it has never been ingested."""


def validate_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not _NS.match(namespace or ""):
        raise NamespaceError(
            f"invalid namespace {namespace!r}: use 1–62 letters, digits, '-' or '_', "
            "starting and ending with a letter or digit"
        )
    return namespace


@dataclass
class NamespaceInfo:
    name: str
    conversation_id: str
    embedder: str
    speakers: list[str]
    sessions: list[int]
    built: dict[str, Any]


class Workspace:
    def __init__(self, data_dir: str | Path, embeddings: Embeddings | None = None) -> None:
        self.data_dir = Path(data_dir).expanduser()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.docs = DocStore(self.data_dir / "recollect.db")
        self._embeddings = embeddings
        self._client: Any = None
        self._lock = threading.Lock()
        self._indexes: dict[tuple[str, str], VectorIndex] = {}
        self._turn_cache: dict[str, tuple[int, dict[str, Turn]]] = {}

    @property
    def embeddings(self) -> Embeddings:
        if self._embeddings is None:
            self._embeddings = get_embeddings()
        return self._embeddings

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                import chromadb
                from chromadb.config import Settings as ChromaSettings

                self._client = chromadb.PersistentClient(
                    path=str(self.data_dir / "chroma"),
                    settings=ChromaSettings(anonymized_telemetry=False, allow_reset=False),
                )
            return self._client

    def index(self, kind: str, namespace: str) -> VectorIndex:
        validate_namespace(namespace)
        key = (kind, namespace)
        with self._lock:
            idx = self._indexes.get(key)
        if idx is None:
            idx = VectorIndex(self.client, kind, namespace, self.embeddings)
            with self._lock:
                self._indexes[key] = idx
        return idx

    # --- namespaces
    def namespace_info(self, namespace: str) -> NamespaceInfo | None:
        validate_namespace(namespace)
        raw = self.docs.get("", "namespace", namespace)
        return NamespaceInfo(**raw) if raw else None

    def require_namespace(self, namespace: str) -> NamespaceInfo:
        info = self.namespace_info(namespace)
        if info is None:
            known = ", ".join(self.docs.namespaces()) or "none yet"
            raise NamespaceError(
                f"namespace {namespace!r} has never been ingested (known: {known}); "
                f"run `recollect ingest FILE --namespace {namespace}` first"
            )
        if info.embedder != embedder_name(self.embeddings):
            raise NamespaceError(
                f"namespace {namespace!r} was built with embedder {info.embedder!r}, "
                f"but this process uses {embedder_name(self.embeddings)!r}"
            )
        return info

    def save_namespace(self, info: NamespaceInfo) -> None:
        self.docs.put("", "namespace", info.name, info.__dict__)

    def mark_built(self, namespace: str, method: str, stamp: Any) -> None:
        with self.docs.transaction():
            info = self.namespace_info(namespace)
            if info is None:
                raise NamespaceError(f"namespace {namespace!r} does not exist")
            info.built[method] = stamp
            self.save_namespace(info)

    def forget_namespace(self, namespace: str) -> dict[str, int]:
        """Delete a namespace's documents, caches and vector collections; other namespaces are untouched.

        Idempotent: forgetting an unknown namespace deletes nothing. Returns what was removed.
        """
        validate_namespace(namespace)
        rows = self.docs.delete_namespace(namespace)
        collections = 0
        for collection in self.client.list_collections():
            name = collection if isinstance(collection, str) else collection.name
            if name.split("-", 1)[-1] == namespace and "-" in name:
                self.client.delete_collection(name)
                collections += 1
        with self._lock:
            for key in [k for k in self._indexes if k[1] == namespace]:
                del self._indexes[key]
        self._turn_cache.pop(namespace, None)
        return {"documents": rows, "collections": collections}

    # --- turns (the source of truth for raw text; vectors live in the `turns` index)
    def store_turns(self, namespace: str, conversation: Conversation) -> int:
        """Idempotently store every turn and session; returns the number of newly embedded turns."""
        with self.docs.transaction():
            self.docs.put_many(
                namespace, "turn", {t.id: {**t.__dict__, "img_urls": list(t.img_urls)} for t in conversation.turns}
            )
            self.docs.put_many(
                namespace,
                "session",
                {
                    str(s.index): {
                        "index": s.index,
                        "date_time": s.date_time,
                        "parsed": s.parsed.isoformat() if s.parsed else None,
                        "turn_ids": [t.id for t in s.turns],
                    }
                    for s in conversation.sessions
                },
            )
        self._turn_cache.pop(namespace, None)
        units = [
            Unit(id=t.id, text=f"{t.speaker}: {t.full_text}", turn_ids=[t.id],
                 metadata={"session": t.session, "date_time": t.date_time, "speaker": t.speaker})
            for t in conversation.turns
        ]
        return self.index("turns", namespace).upsert(units)

    def turns(self, namespace: str) -> dict[str, Turn]:
        """Every turn of the namespace by id, in conversation order (cached until the next ingest)."""
        count = self.docs.count(namespace, "turn")
        cached = self._turn_cache.get(namespace)
        if cached and cached[0] == count:
            return cached[1]
        rows = self.docs.items(namespace, "turn")
        turns = {k: Turn(**{**v, "img_urls": tuple(v.get("img_urls") or ())}) for k, v in rows.items()}
        ordered = dict(sorted(turns.items(), key=lambda kv: (kv[1].session, kv[1].index)))
        self._turn_cache[namespace] = (count, ordered)
        return ordered

    def sessions(self, namespace: str) -> list[Session]:
        from datetime import datetime

        turns = self.turns(namespace)
        out = []
        for raw in sorted(self.docs.items(namespace, "session").values(), key=lambda s: s["index"]):
            parsed = datetime.fromisoformat(raw["parsed"]) if raw.get("parsed") else None
            out.append(Session(raw["index"], raw["date_time"], parsed, tuple(turns[i] for i in raw["turn_ids"] if i in turns)))
        return out

    def conversation(self, namespace: str) -> Conversation:
        info = self.require_namespace(namespace)
        return Conversation(id=info.conversation_id, speakers=tuple(info.speakers), sessions=tuple(self.sessions(namespace)))


_WORKSPACES: dict[str, Workspace] = {}
_WS_LOCK = threading.Lock()


def open_workspace(data_dir: str | Path) -> Workspace:
    """The process-wide workspace for a data directory (created on first use)."""
    key = str(Path(data_dir).expanduser().resolve())
    with _WS_LOCK:
        ws = _WORKSPACES.get(key)
        if ws is None:
            ws = _WORKSPACES[key] = Workspace(key)
        return ws


def register_workspace(ws: Workspace) -> Workspace:
    """Make `open_workspace(ws.data_dir)` return this instance (e.g. one with a chosen embedder)."""
    with _WS_LOCK:
        _WORKSPACES[str(ws.data_dir.resolve())] = ws
    return ws
