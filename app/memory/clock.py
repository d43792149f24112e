"""Seconds a graph run spends retrieving: query embeddings, vector searches, BM25 and fusion.

The speed report splits a question's seconds into the model's prefill and decode (the server's own
timings), the rest of each model call, retrieval, and everything else (graph steps, store reads, prompt
building). Retrieval is the part no one place owns, since every method retrieves its own way, so the
functions that do it are wrapped with `timed_retrieval` and add their seconds to the run's clock.

A clock is opened per run (`retrieval_clock()`, as `recollect.runner.ask` does); outside one the wrapper
costs one context-variable read. Nested wrapped calls (a retriever that embeds its query) count once.
The clock is one shared object, so graph steps that LangGraph runs in worker threads (each in a copy of
the context) add to the same total.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class RetrievalClock:
    """Retrieval seconds of one run, safe to add to from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seconds = 0.0
        self.calls = 0

    def add(self, seconds: float) -> None:
        with self._lock:
            self.seconds += seconds
            self.calls += 1


_CLOCK: ContextVar[RetrievalClock | None] = ContextVar("recollect_retrieval_clock", default=None)
_INSIDE: ContextVar[bool] = ContextVar("recollect_retrieval_inside", default=False)


@contextmanager
def retrieval_clock() -> Iterator[RetrievalClock]:
    """A fresh clock for the calls made inside the block (and the threads they start with its context)."""
    clock = RetrievalClock()
    token = _CLOCK.set(clock)
    try:
        yield clock
    finally:
        _CLOCK.reset(token)


def timed_retrieval(fn: Callable[P, R]) -> Callable[P, R]:
    """Add the call's seconds to the open clock, unless an outer wrapped call is already timing it."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        clock = _CLOCK.get()
        if clock is None or _INSIDE.get():
            return fn(*args, **kwargs)
        token = _INSIDE.set(True)
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            clock.add(time.perf_counter() - start)
            _INSIDE.reset(token)

    return wrapper
