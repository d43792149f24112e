"""The background builds `remember` queues: one worker thread per process, off every reply path.

A namespace's job names the builders to run: the turns' own vectors first (`turns`, no model), then HyMem's
summaries, MGRetrieval's keywords, MRAgent's graph, and MemR3's chunks when they could not be extended at once. Jobs of one namespace merge while queued, so a burst
of `remember` calls costs one build. A builder that raises is tried again after a pause (`RETRY_DELAYS_S`),
then marked `failed`; every state is written to the namespace's documents as it changes
(recollect.memory.build_status), so `recollect namespaces` and each question's trace show it, and a process
that stops with builds queued leaves them `pending` for the next `remember` or `ingest` to run. Nothing is
dropped silently: a fallback a builder used (a reply the model could not write as valid JSON) is listed in
the `done` state, and the builder asks that call again at its next build.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from recollect.graphs.registry import load_builder
from recollect.memory.build_status import set_status
from recollect.memory.incremental import CHUNKS, TURN_VECTORS, namespace_lock
from recollect.memory.workspace import NamespaceError, Workspace
from recollect.settings import Context

# Pauses before the second and the third attempt of a builder that raised (a model endpoint restarting, a
# locked database); after the last one it is `failed` until the namespace's next remember or ingest.
RETRY_DELAYS_S: tuple[float, ...] = (5.0, 30.0)


def _no_progress(items: Iterable[Any], desc: str) -> Iterable[Any]:
    return items


@dataclass
class _Job:
    ws: Workspace
    namespace: str
    builders: list[str]
    ctx: Context
    attempts: dict[str, int] = field(default_factory=dict)
    not_before: float = 0.0


class BuildQueue:
    """Background builds, one at a time, in the order namespaces were queued (a job waiting for its retry
    lets the others go first)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._jobs: dict[tuple[str, str], _Job] = {}
        self._running: tuple[str, str] | None = None
        self._thread: threading.Thread | None = None

    @staticmethod
    def _key(ws: Workspace, namespace: str) -> tuple[str, str]:
        return (str(ws.data_dir), namespace)

    def submit(self, ws: Workspace, namespace: str, builders: Iterable[str], ctx: Context) -> list[str]:
        """Queue `builders` for `namespace` (marked `pending` now); returns them."""
        wanted = list(dict.fromkeys(builders))
        for name in wanted:
            set_status(ws, namespace, name, "pending")
        with self._cond:
            job = self._jobs.get(self._key(ws, namespace))
            if job is None:
                self._jobs[self._key(ws, namespace)] = _Job(ws, namespace, wanted, ctx)
            else:  # still queued: one build covers both calls, with the newest settings
                job.builders = list(dict.fromkeys([*job.builders, *wanted]))
                job.ctx, job.ws, job.not_before = ctx, ws, 0.0
                for name in wanted:  # asked again: its attempts start over
                    job.attempts.pop(name, None)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="recollect-builds", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return wanted

    def active(self, ws: Workspace, namespace: str) -> bool:
        """Whether this process has a build of `namespace` queued or running."""
        key = self._key(ws, namespace)
        with self._cond:
            return key in self._jobs or self._running == key

    def wait(self, namespace: str | None = None, timeout: float | None = None) -> bool:
        """Block until no build (of `namespace`, or of any) is queued or running; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def busy() -> bool:
            keys = [*self._jobs, *([self._running] if self._running else [])]
            return any(namespace is None or key[1] == namespace for key in keys)

        with self._cond:
            while busy():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left if left is not None else 1.0)
        return True

    def _next(self) -> _Job:
        with self._cond:
            while True:
                now = time.monotonic()
                ready = [key for key, job in self._jobs.items() if job.not_before <= now]
                if ready:
                    self._running = ready[0]
                    return self._jobs.pop(ready[0])
                soonest = min((job.not_before for job in self._jobs.values()), default=None)
                self._cond.wait(None if soonest is None else max(0.01, soonest - now))

    def _work(self) -> None:
        while True:
            job = self._next()
            try:
                self._run(job)
            finally:
                with self._cond:
                    self._running = None
                    self._cond.notify_all()

    def _run(self, job: _Job) -> None:
        ws, ns = job.ws, job.namespace
        for position, name in enumerate(job.builders):
            set_status(ws, ns, name, "running", attempts=job.attempts.get(name, 0) + 1)
            try:
                report = self._build(job, name)
            except Exception as exc:  # a model endpoint, a store: never dropped, tried again or marked failed
                if isinstance(exc, NamespaceError) and ws.namespace_info(ns) is None:
                    return  # forgotten meanwhile: nothing to build, and its status documents are gone
                self._failed(job, position, f"{type(exc).__name__}: {exc}"[:300])
                return
            set_status(ws, ns, name, "done", sessions=report["sessions"], seconds=report["seconds"],
                       llm_calls=report["llm_calls"], fallbacks=report["fallbacks"][:20])

    def _failed(self, job: _Job, position: int, error: str) -> None:
        """Builder `job.builders[position]` raised: try it again after a pause, or after its last attempt mark
        it failed (the namespace's next remember or ingest tries again) and go on with the rest."""
        name = job.builders[position]
        tries = job.attempts[name] = job.attempts.get(name, 0) + 1
        if tries <= len(RETRY_DELAYS_S):
            set_status(job.ws, job.namespace, name, "retrying", attempts=tries, error=error)
            self._retry(job, job.builders[position:], RETRY_DELAYS_S[tries - 1])
        else:
            set_status(job.ws, job.namespace, name, "failed", attempts=tries, error=error)
            self._retry(job, job.builders[position + 1:], 0.0)

    def _retry(self, job: _Job, builders: list[str], delay: float) -> None:
        if not builders:
            return
        with self._cond:
            key = self._key(job.ws, job.namespace)
            queued = self._jobs.get(key)
            job.builders = list(dict.fromkeys([*builders, *(queued.builders if queued else [])]))
            job.not_before = time.monotonic() + delay
            self._jobs[key] = job

    @staticmethod
    def _build(job: _Job, name: str) -> dict[str, Any]:
        ws, ns = job.ws, job.namespace
        start = time.monotonic()
        if name == TURN_VECTORS:  # no builder of its own: every turn's vector, those already there skipped
            turns = ws.turns(ns)
            if ws.namespace_info(ns) is None:
                raise NamespaceError(f"namespace {ns!r} does not exist")
            embedded = ws.embed_turns(ns, list(turns.values()))
            info = ws.namespace_info(ns)  # the record as it is after embedding
            if info is None:  # forgotten meanwhile
                raise NamespaceError(f"namespace {ns!r} does not exist")
            return {"sessions": len(info.sessions), "seconds": round(time.monotonic() - start, 3),
                    "llm_calls": 0, "fallbacks": [], "embedded": embedded}
        if name == CHUNKS:
            with namespace_lock(ws, ns):  # it rewrites the chunks the reply path extends
                conversation = ws.conversation(ns)
                report = load_builder(name)(ws, ns, conversation, job.ctx, _no_progress)
        else:
            conversation = ws.conversation(ns)
            report = load_builder(name)(ws, ns, conversation, job.ctx, _no_progress)
        with namespace_lock(ws, ns):  # the reply path rewrites the namespace's record as it appends
            ws.mark_built(ns, name, {"hash": conversation.content_hash(), "sessions": len(conversation.sessions)})
        return {"sessions": len(conversation.sessions), "seconds": round(time.monotonic() - start, 3),
                "llm_calls": report.llm_calls, "fallbacks": list(report.fallbacks)}


QUEUE = BuildQueue()
