"""The state of a namespace's background memory builds (`recollect.agent_memory` queues them), kept in its documents.

One document per builder, under the namespace's `build_status` kind, so `forget` removes it with the rest and
every process sharing the data directory reads the same state:

- `pending`: queued, not started (a process that stopped with builds queued leaves them pending: the next
  `remember` or `ingest` of the namespace runs them);
- `running`;
- `retrying`: an attempt raised (`error`); another comes after a pause;
- `failed`: every attempt raised; the next `remember` or `ingest` of the namespace tries again;
- `done`: built; `fallbacks` lists what the builder had to fall back on (a model reply it could not use),
  which its next build asks again.

`recollect namespaces` prints them, and each question's trace starts with a `memory_status` record while any is
not done, so an answer read from memory that is still being built says so.
"""

from __future__ import annotations

import time
from typing import Any

KIND = "build_status"
SETTLED = "done"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def set_status(ws: Any, namespace: str, builder: str, state: str, **fields: Any) -> None:
    """Record `builder`'s `state` for `namespace`, keeping when it was first queued; a namespace forgotten
    meanwhile gets no document back."""
    if ws.namespace_info(namespace) is None:
        return
    old = ws.docs.get(namespace, KIND, builder) or {}
    since = old.get("since") if old.get("state") != SETTLED else None
    ws.docs.put(namespace, KIND, builder, {"builder": builder, "state": state, "since": since or _now(),
                                           "updated": _now(), **fields})


def statuses(ws: Any, namespace: str) -> dict[str, dict[str, Any]]:
    """Every builder's status document for `namespace` (none for builds never queued in the background)."""
    return dict(ws.docs.items(namespace, KIND))


def unsettled(ws: Any, namespace: str) -> dict[str, dict[str, Any]]:
    """The builds of `namespace` that are not done: queued, running, retrying or failed."""
    return {name: s for name, s in statuses(ws, namespace).items() if s.get("state") != SETTLED}


def describe(status: dict[str, Any]) -> str:
    """One line for `recollect namespaces`: `hymem: retrying (attempt 2, since ...): <error>`."""
    state = status.get("state", "?")
    details = []
    if state != SETTLED:
        details += [f"attempt {status['attempts']}"] if status.get("attempts") else []
        details += [f"since {status['since']}"] if status.get("since") else []
    if status.get("fallbacks"):
        details.append(f"{len(status['fallbacks'])} fallback(s), asked again at its next build")
    line = f"{status.get('builder', '?')}: {state}" + (f" ({', '.join(details)})" if details else "")
    return line + (f": {str(status['error'])[:200]}" if status.get("error") and state != SETTLED else "")


def status_note(ws: Any, namespace: str) -> dict[str, Any] | None:
    """The `memory_status` trace fields of a question on `namespace` while a build is not done, else None."""
    open_builds = unsettled(ws, namespace)
    if not open_builds:
        return None
    return {"builds": {name: {k: s.get(k) for k in ("state", "since", "attempts", "error") if s.get(k)}
                       for name, s in sorted(open_builds.items())},
            "note": "memory still being built in the background: the answer reads what is built so far"}
