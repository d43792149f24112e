"""The append lane: what the remember node hands off, so an agent's run never waits for the store either.

`remember(..., background=True)` (the node's way) puts the turns on one worker thread of their own, apart from
the model builds of recollect.agent_memory.queue, so an append never waits behind a long build. A recall in
this process (the recall node and tool, `RecollectRetriever`) first waits for its namespace's pending appends
(`settle`), so it reads everything remembered before it. An append that raises is logged and recorded as the
namespace's `remember` status; its messages were not marked remembered, so the next remember of the thread
(an agent passes its whole history) adds them again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

log = logging.getLogger("recollect.remember")


class AppendLane:
    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recollect-remember")
        self._pending: dict[str, list[Future[Any]]] = {}
        self._lock = threading.Lock()

    def submit(self, namespace: str, append: Callable[[], Any], on_error: Callable[[BaseException], None]) -> None:
        def run() -> Any:
            try:
                return append()
            except Exception as error:  # recorded before the future completes, so `settle` sees it
                log.error("remembering into namespace %r failed (the next remember adds the turns again): %s",
                          namespace, error)
                on_error(error)
                raise

        future = self._pool.submit(run)
        with self._lock:
            self._pending.setdefault(namespace, []).append(future)

        def done(finished: Future[Any]) -> None:
            with self._lock:
                left = [f for f in self._pending.get(namespace, []) if f is not finished]
                if left:
                    self._pending[namespace] = left
                else:
                    self._pending.pop(namespace, None)

        future.add_done_callback(done)

    def settle(self, namespace: str | None = None, timeout: float | None = 30.0) -> bool:
        """Wait for the pending appends (of `namespace`, or all); False when some are still running at `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            futures = [f for ns, fs in self._pending.items() if namespace is None or ns == namespace for f in fs]
        for future in futures:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                future.result(timeout=left)
            except TimeoutError:
                return False
            except Exception:  # logged and recorded by `run`
                continue
        return True


APPENDS = AppendLane()
