"""The eval's tape: every request sent to the model and its reply, kept in the cache, replayable.

Why: a row made by older code stays valid only if the new code sends the model the same requests
(then every reply, hence the answer, is the same). The eval records each request and reply under
`<cache>/tapes/<model>/`, keyed by the request's path and canonical JSON body, and a later eval replays
a stale row's question from it with no model at all: zero misses and the same answer digest carry the
row over to the new fingerprint (`recollect.eval.ledger.carried`). The tapes hold dataset text, so they
stay in the cache, never in the repository.

The tape sits in the HTTP client of every chat model the eval builds (an httpx transport around the
real one), so it sees the exact bytes sent. The mode is a context variable, which LangGraph copies into
the tasks it runs: `record` forwards and records (fresh rows; their seconds are real), `replay` answers
from the tape only (a miss fails that request), `prefer` answers from the tape when it can and forwards
otherwise (memory builds).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

Mode = Literal["record", "replay", "prefer", "off"]
# What a replay answers for a request that is not on the tape: a client error, which the OpenAI client
# does not retry, so a miss costs no back-off.
MISS_STATUS = 400


def request_key(path: str, body: bytes) -> str:
    """The same request gives the same key whatever the key order of its JSON body."""
    try:
        canonical = json.dumps(json.loads(body), sort_keys=True, ensure_ascii=False)
    except ValueError:
        canonical = body.decode("utf-8", "replace")
    return hashlib.sha256(f"{path}\n{canonical}".encode()).hexdigest()


@dataclass
class TapeStats:
    """What one question's (or build's) requests did."""

    hits: int = 0
    misses: int = 0
    recorded: int = 0
    keys: list[str] = field(default_factory=list)

    def evidence(self) -> dict[str, Any]:
        """The replay as a carry-over's evidence: how many requests, all answered, and which."""
        return {"replayed_requests": self.hits, "missed_requests": self.misses,
                "requests_sha256": hashlib.sha256("\n".join(self.keys).encode()).hexdigest()}


_MODE: contextvars.ContextVar[tuple[Mode, TapeStats | None] | None] = contextvars.ContextVar(
    "recollect_tape_mode", default=None)


class TapeStore:
    """The tapes of one model: every `*.jsonl` file of its folder, read once; this process appends to
    its own file (several processes may record beside each other)."""

    def __init__(self, folder: Path, default_mode: Mode = "record") -> None:
        self.folder = Path(folder)
        self.default_mode: Mode = default_mode
        self.lock = threading.Lock()
        self.replies: dict[str, dict[str, Any]] = {}
        self.own = self.folder / f"tape-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.jsonl"
        if self.folder.is_dir():
            for path in sorted(self.folder.glob("*.jsonl")):
                self.load(path)

    def load(self, path: Path) -> int:
        """Add a tape file (this store's format, or `benchmarks/llm_tape.py`'s); returns its entries."""
        n = 0
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by an interrupted write
            if int(row.get("status", 0)) == 200:  # an error reply proves nothing
                self.replies.setdefault(row["key"], row)
                n += 1
        return n

    def __len__(self) -> int:
        return len(self.replies)

    def served_seconds(self, keys: list[str]) -> float:
        """The server time (prefill and decode, from each reply's llama.cpp `timings`) of the taped replies
        under `keys`; a reply without timings (a remote endpoint's) counts 0."""
        total = 0.0
        for key in keys:
            try:
                timings = json.loads(self.replies[key]["reply"]).get("timings") or {}
            except (KeyError, ValueError, AttributeError):
                continue
            total += (float(timings.get("prompt_ms") or 0.0) + float(timings.get("predicted_ms") or 0.0)) / 1000
        return total

    def mode(self) -> tuple[Mode, TapeStats | None]:
        return _MODE.get() or (self.default_mode, None)

    def answer(self, path: str, body: bytes, forward: Any) -> tuple[int, dict[str, str], bytes]:
        key = request_key(path, body)
        mode, stats = self.mode()
        if mode in ("replay", "prefer"):
            row = self.replies.get(key)
            if row is not None:
                if stats is not None:
                    stats.hits += 1
                    stats.keys.append(key)
                return int(row["status"]), {"content-type": row["content_type"]}, row["reply"].encode("utf-8")
            if mode == "replay":
                if stats is not None:
                    stats.misses += 1
                return MISS_STATUS, {"content-type": "text/plain"}, b"recollect tape: this request is not on the tape"
        status, headers, reply = forward()
        if mode != "off" and status == 200:
            entry = {"key": key, "path": path, "status": status,
                     "content_type": headers.get("content-type", "application/json"),
                     "request": body.decode("utf-8", "replace"), "reply": reply.decode("utf-8", "replace")}
            with self.lock:
                self.replies.setdefault(key, entry)
                self.folder.mkdir(parents=True, exist_ok=True)
                with self.own.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
            if stats is not None:
                stats.recorded += 1
        return status, headers, reply


class TapeTransport(httpx.BaseTransport):
    """An httpx transport that passes every chat request through a `TapeStore`."""

    def __init__(self, store: TapeStore, inner: httpx.BaseTransport | None = None) -> None:
        self.store = store
        self.inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        path = request.url.path.split("/v1", 1)[-1]  # the tape does not depend on the endpoint's prefix

        def forward() -> tuple[int, dict[str, str], bytes]:
            response = self.inner.handle_request(request)
            content = response.read()
            return response.status_code, {k.lower(): v for k, v in response.headers.items()}, content

        status, headers, content = self.store.answer(path, body, forward)
        return httpx.Response(status, headers={"content-type": headers.get("content-type", "application/json")},
                              content=content, request=request)

    def close(self) -> None:
        self.inner.close()


@contextlib.contextmanager
def tape_mode(mode: Mode) -> Iterator[TapeStats]:
    """Requests made inside (and in the LangGraph tasks started inside) use `mode`; yields their stats."""
    stats = TapeStats()
    token = _MODE.set((mode, stats))
    try:
        yield stats
    finally:
        _MODE.reset(token)


def tape_folder(cache_dir: str | Path, model_id: str) -> Path:
    """One folder of tapes per model identity (`recollect.eval.fingerprint.model_identity`)."""
    safe = hashlib.sha256(model_id.encode()).hexdigest()[:16]
    return Path(cache_dir) / "tapes" / safe


_INSTALLED: dict[str, Any] = {}


def install(store: TapeStore) -> None:
    """Put `store` into the HTTP client of every chat model built from now on in this process.

    Chat models already built are dropped from the process cache, so the next call builds one through
    the tape. Idempotent: a second install replaces the store.
    """
    from recollect.llm import models

    original = _INSTALLED.setdefault("original", models._openai)

    def through_tape(base_url: str, api_key: str, model: str, json_whitespace: str = "", slots: int = 0) -> BaseChatModel:
        chat = original(base_url, api_key, model, json_whitespace, slots)
        root = chat.root_client.copy(http_client=httpx.Client(transport=TapeTransport(store),
                                                               timeout=chat.root_client.timeout))
        object.__setattr__(chat, "root_client", root)
        object.__setattr__(chat, "client", root.chat.completions)
        return chat

    models._openai = through_tape
    with models._LOCK:
        models._MODELS.clear()
    _INSTALLED["store"] = store


def uninstall() -> None:
    from recollect.llm import models

    if "original" in _INSTALLED:
        models._openai = _INSTALLED.pop("original")
        with models._LOCK:
            models._MODELS.clear()
    _INSTALLED.pop("store", None)


def installed() -> TapeStore | None:
    store = _INSTALLED.get("store")
    return store if isinstance(store, TapeStore) else None
