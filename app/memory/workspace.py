"""A data directory: the embedded database, the Chroma client and the embedder, opened once.

`open_workspace(data_dir)` is cached per process. Namespaces are validated here (by the rule of
recollect.namespace_ids, whose names stay importable from this module); every store method takes the
namespace and can only see that namespace's documents and collections.

A namespace is the app's own id for a user or conversation (`a@b.com`, `auth0|123`, any script):
SQLite keys it as given (bound parameters), a LangGraph store gets an escaped label
(`recollect.memory.store_docs`), Chroma gets `storage_name(namespace)`, a name Chroma accepts.

A process may stay up for days (`recollect serve`) while `recollect forget` and `ingest` run beside it,
so cached collection handles and turns are checked against the stores before use.

Documents live in `recollect.db` (`RECOLLECT_DOC_STORE=recollect_db`, `DocStore`) or as items of a
LangGraph store (`langgraph`, `StoreDocs`): `store.sqlite`, or the Postgres database of
RECOLLECT_POSTGRES_URI, which every data directory and process then shares. Opening a data directory
with the store copies an existing `recollect.db` into it once (`migrate_doc_db`), without calling any model.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import sqlite3
import tempfile
import threading
import unicodedata
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from recollect.dialogue.models import Conversation, Session, Turn
from recollect.memory.backends import document_backend, open_base_store
from recollect.memory.docstore import DocStore
from recollect.memory.embeddings import embedder_name, get_embeddings
from recollect.memory.store_docs import STORE_FILE, Migration, StoreDocs, migrate_doc_db
from recollect.memory.vectors import KIND_MARKER, Unit, VectorIndex
from recollect.namespace_ids import NAMESPACE_MAX_CHARS, NamespaceError, validate_namespace  # noqa: F401

# The only namespaces accepted before any printable id was: each is its own storage name, so the
# collections of data directories written then keep their names.
_PLAIN_NS = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,60}[A-Za-z0-9])?$")
_NOT_PLAIN = re.compile(r"[^A-Za-z0-9_-]+")
_SLUG_CHARS = 24  # with the hash, collection names stay within the 63 characters older Chromas allow
_TURNS_VERSION = "turns_version"  # docs kind: one id per store_turns, so other processes see a re-ingest


class DataDirError(ValueError):
    """The data directory cannot hold the stores: it is a file, lies under one, or is not writable."""


def storage_name(namespace: str) -> str:
    """The namespace's name inside Chroma (collections `<kind>-<name>`, only [A-Za-z0-9._-] allowed).

    A plain name (letters, digits, '-', '_') is its own storage name; any other id becomes a readable
    ASCII slug, '.', and 12 hex digits of its sha256 (`a@b.com` -> `a_b_com.<hash>`). A plain name
    never holds '.', so the two forms cannot collide.
    """
    validate_namespace(namespace)
    if _PLAIN_NS.match(namespace):
        return namespace
    ascii_text = unicodedata.normalize("NFKD", namespace).encode("ascii", "ignore").decode()
    slug = _NOT_PLAIN.sub("_", ascii_text).strip("_-")[:_SLUG_CHARS].rstrip("_-") or "ns"
    return f"{slug}.{hashlib.sha256(namespace.encode()).hexdigest()[:12]}"


# Store files a command writes: SQLite opens a read-only file and fails only at the first write, far
# from the cause, so each that exists must be writable up front.
_STORE_FILES = ("recollect.db", STORE_FILE, "checkpoints.sqlite", "chroma", "chroma/chroma.sqlite3")


def usable_data_dir(data_dir: str | Path) -> Path:
    """`data_dir`, created if missing; a `DataDirError` naming the cause when it cannot hold the stores."""
    path = Path(data_dir).expanduser()
    where = f"data directory {str(path)!r}"
    fix = "choose another with --data-dir or RECOLLECT_DATA_DIR"
    try:
        blocker = next((p for p in (path, *path.parents) if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            what = "is a file" if blocker == path else f"lies under {str(blocker)!r}, which is a file"
            raise DataDirError(f"{where} {what}, not a directory; {fix}")
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):  # the one reliable test of writability (ACLs, read-only mounts)
            pass
    except OSError as exc:
        raise DataDirError(f"{where} is not writable ({exc.strerror or exc}); {fix}") from exc
    for name in _STORE_FILES:
        for entry in (path / name, path / f"{name}-wal", path / f"{name}-shm"):
            if entry.exists() and not os.access(entry, os.W_OK | (os.X_OK if entry.is_dir() else 0)):
                raise DataDirError(f"{where}: {entry.name} is read-only; make it writable or {fix}")
    return path


class VectorServerError(ValueError):
    """The Chroma server named by RECOLLECT_CHROMA_URL is malformed or cannot be reached."""


def chroma_server_client(url: str, token: str = "") -> Any:
    """A `chromadb.HttpClient` for `url` (`http[s]://host[:port]`), checked with a heartbeat.

    `token` goes as Chroma's token auth (`Authorization: Bearer <token>`; Chroma's own
    CHROMA_AUTH_TOKEN_TRANSPORT_HEADER=X-Chroma-Token switches the header).
    """
    from urllib.parse import urlsplit

    import chromadb
    from chromadb.config import Settings as ChromaSettings

    fix = "start the server or correct RECOLLECT_CHROMA_URL"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise VectorServerError(f"Chroma server URL {url!r} is malformed ({exc}); {fix}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") \
            or parts.query or parts.fragment or parts.username:
        raise VectorServerError(f"Chroma server URL {url!r} is not of the form http[s]://host[:port]; {fix}")
    ssl = parts.scheme == "https"
    auth: dict[str, Any] = {"chroma_client_auth_provider": "chromadb.auth.token_authn.TokenAuthClientProvider",
            "chroma_client_auth_credentials": token} if token else {}
    try:
        client = chromadb.HttpClient(
            host=parts.hostname, port=port or (443 if ssl else 80), ssl=ssl,
            settings=ChromaSettings(anonymized_telemetry=False, allow_reset=False, **auth),
        )
        client.heartbeat()
    except Exception as exc:  # chromadb raises a bare ValueError, httpx's or its own errors, by cause
        reason = str(exc).strip() or type(exc).__name__
        raise VectorServerError(f"cannot reach the Chroma server at {url} ({reason}); {fix}") from exc
    return client


@dataclass
class NamespaceInfo:
    name: str
    conversation_id: str
    embedder: str
    speakers: list[str]
    sessions: list[int]
    built: dict[str, Any]


def _opened(path: Path, open_it: Any) -> Any:
    try:
        return open_it(path)
    except sqlite3.DatabaseError as exc:  # e.g. "file is not a database"
        raise DataDirError(f"{path}: {exc}") from exc


def open_docs(data_dir: Path, doc_store: str | None = None) -> DocStore | StoreDocs:
    """The data directory's document store: `doc_store` or the `RECOLLECT_DOC_STORE` setting; with
    RECOLLECT_POSTGRES_URI, the Postgres store (`recollect.memory.backends`)."""
    if document_backend(doc_store) == "recollect_db":
        return _opened(data_dir / "recollect.db", DocStore)
    docs = StoreDocs(_opened(data_dir / STORE_FILE, lambda _: open_base_store(data_dir)))
    if (data_dir / "recollect.db").exists():  # the automatic upgrade (a no-op once done)
        _opened(data_dir / "recollect.db", lambda path: migrate_doc_db(path, docs))
    return docs


def migrate_data_dir(data_dir: str | Path) -> Migration | None:
    """Copy a data directory's recollect.db into its LangGraph store (`recollect migrate`), whatever
    RECOLLECT_DOC_STORE says; None when there is no recollect.db. Idempotent, calls no model."""
    path = usable_data_dir(data_dir)
    if not (path / "recollect.db").exists():
        return None
    docs = StoreDocs(_opened(path / STORE_FILE, lambda _: open_base_store(path)))
    return _opened(path / "recollect.db", lambda db: migrate_doc_db(db, docs))


class Workspace:
    def __init__(self, data_dir: str | Path, embeddings: Embeddings | None = None,
                 doc_store: str | None = None) -> None:
        self.data_dir = usable_data_dir(data_dir)
        self.docs: DocStore | StoreDocs = open_docs(self.data_dir, doc_store)
        self._embeddings = embeddings
        self._client: Any = None
        self._lock = threading.Lock()
        self._indexes: dict[tuple[str, str], VectorIndex] = {}
        self._turn_cache: dict[str, tuple[tuple[Any, int], dict[str, Turn]]] = {}
        self._views: dict[int, Workspace] = {}  # recollect.memory.run_store: other document stores

    @property
    def embeddings(self) -> Embeddings:
        if self._embeddings is None:
            self._embeddings = get_embeddings()
        return self._embeddings

    @property
    def client(self) -> Any:
        """The Chroma client: a server's (`RECOLLECT_CHROMA_URL`), else the embedded one in `<data_dir>/chroma`."""
        with self._lock:
            if self._client is None:
                import chromadb
                from chromadb.config import Settings as ChromaSettings

                from recollect.settings import get_settings

                settings = get_settings()
                if settings.chroma_url:
                    self._client = chroma_server_client(settings.chroma_url, settings.chroma_token)
                else:
                    self._client = chromadb.PersistentClient(
                        path=str(self.data_dir / "chroma"),
                        settings=ChromaSettings(anonymized_telemetry=False, allow_reset=False),
                    )
            return self._client

    def index(self, kind: str, namespace: str) -> VectorIndex:
        key = (kind, storage_name(namespace))
        with self._lock:
            idx = self._indexes.get(key)
        if idx is None or not self._is_current(idx):
            idx = VectorIndex(self.client, kind, key[1], self.embeddings)
            with self._lock:
                self._indexes[key] = idx
        return idx

    def _is_current(self, idx: VectorIndex) -> bool:
        """Whether a cached handle still names the live collection: another process may have deleted and
        recreated it (`recollect forget`, then `ingest`), and the old handle would fail until a restart."""
        from chromadb.errors import NotFoundError

        try:
            return bool(self.client.get_collection(idx.collection.name).id == idx.collection.id)
        except (NotFoundError, ValueError):
            return False

    # --- namespaces
    def namespace_info(self, namespace: str) -> NamespaceInfo | None:
        validate_namespace(namespace)
        raw = self.docs.get("", "namespace", namespace)
        return NamespaceInfo(**raw) if raw else None

    def require_namespace(self, namespace: str) -> NamespaceInfo:
        info = self.namespace_info(namespace)
        if info is None:
            known = ", ".join(repr(n) for n in self.docs.namespaces()) or "none yet"
            raise NamespaceError(
                f"namespace {namespace!r} has never been ingested (known: {known}); "
                f"run `recollect ingest FILE --namespace {shlex.quote(namespace)}` first"
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
        stored = storage_name(namespace)
        rows = self.docs.delete_namespace(namespace)
        collections = 0
        # A server may hold other applications' collections; ours there all carry their kind as a marker
        # (`VectorIndex`). The embedded Chroma is ours alone, and predates the marker.
        on_server = bool(self.client.get_settings().chroma_server_host)
        for collection in self.client.list_collections():
            name = collection if isinstance(collection, str) else collection.name
            kind, _, suffix = name.partition("-")
            if not suffix or suffix != stored:
                continue
            if on_server and (getattr(collection, "metadata", None) or {}).get(KIND_MARKER) != kind:
                continue
            self.client.delete_collection(name)
            collections += 1
        with self._lock:
            for key in [k for k in self._indexes if k[1] == stored]:
                del self._indexes[key]
        self._turn_cache.pop(namespace, None)
        return {"documents": rows, "collections": collections}

    # --- turns (the source of truth for raw text; vectors live in the `turns` index)
    def store_turns(self, namespace: str, conversation: Conversation, *, embed: bool = True) -> int:
        """Idempotently store every turn and session; returns the number of newly embedded turns. `embed=False`
        leaves the turns' vectors to a later `embed_turns` (`recollect.agent_memory` embeds them in the background)."""
        # Opened first so that an unreachable Chroma server fails the ingest before any document is written.
        index = self.index("turns", namespace) if embed else None
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
            self.docs.put(namespace, _TURNS_VERSION, "current", uuid.uuid4().hex)
        self._turn_cache.pop(namespace, None)
        return self.embed_turns(namespace, conversation.turns, index) if embed else 0

    def embed_turns(self, namespace: str, turns: list[Turn], index: VectorIndex | None = None) -> int:
        """Put `turns` in the namespace's turn vectors (those whose text is unchanged are not embedded again)."""
        units = [
            Unit(id=t.id, text=f"{t.speaker}: {t.full_text}", turn_ids=[t.id],
                 metadata={"session": t.session, "date_time": t.date_time, "speaker": t.speaker})
            for t in turns
        ]
        return (index or self.index("turns", namespace)).upsert(units)

    def turns(self, namespace: str) -> dict[str, Turn]:
        """Every turn of the namespace by id, in conversation order (cached until the next ingest, here or
        in another process: a forget and re-ingest may keep the count but not the text)."""
        # The version alone says whether turns changed; a data directory written before it existed falls
        # back to the count (counting reads every turn from a LangGraph store).
        stamp = self.docs.get(namespace, _TURNS_VERSION, "current")
        version = (stamp, 0 if stamp else self.docs.count(namespace, "turn"))
        cached = self._turn_cache.get(namespace)
        if cached and cached[0] == version:
            return cached[1]
        rows = self.docs.items(namespace, "turn")
        turns = {k: Turn(**{**v, "img_urls": tuple(v.get("img_urls") or ())}) for k, v in rows.items()}
        ordered = dict(sorted(turns.items(), key=lambda kv: (kv[1].session, kv[1].index)))
        self._turn_cache[namespace] = (version, ordered)
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
