"""Which document store a graph run reads: the one it was compiled with (`runtime.store`).

`recollect.runner.ask`, `create_graph` and `recollect serve` compile every graph with the data directory's own
store, so a run reads and writes the same items as `recollect ingest`, `forget` and the eval. An application
that compiles a graph with a store of its own gets its memories there instead: the run gets a view of the
data directory (its vectors, embedder and Chroma handles) whose documents live in that store.
"""

from __future__ import annotations

import copy
from typing import Any

from langgraph.config import get_store

from recollect.memory.store_docs import StoreDocs
from recollect.memory.workspace import Workspace, open_workspace


def on_store(ws: Workspace, store: Any) -> Workspace:
    """`ws` with its documents in `store`. Views are kept per store, each with its own turn cache, since two
    stores may hold different turns under one namespace name."""
    if isinstance(ws.docs, StoreDocs) and ws.docs.store is store:
        return ws
    client = ws.client  # opened first, so every view shares this one client and its collection handles
    with ws._lock:
        view = ws._views.get(id(store))
        if view is None or not isinstance(view.docs, StoreDocs) or view.docs.store is not store:
            view = copy.copy(ws)  # shares the client, the collection handles, the embedder and the lock
            view.docs, view._client, view._turn_cache, view._views = StoreDocs(store), client, {}, {}
            ws._views[id(store)] = view
    return view


def run_workspace(data_dir: str) -> Workspace:
    """The workspace a node of a running graph reads: the data directory's, on the run's store when there is
    one. Outside a run (a builder, the eval) and with the legacy `recollect_db` backend, the data directory's."""
    ws = open_workspace(data_dir)
    if not isinstance(ws.docs, StoreDocs):
        return ws
    try:
        store = get_store()
    except RuntimeError:  # not inside a graph run
        return ws
    return ws if store is None else on_store(ws, store)
